#!/bin/sh
# android-cgroups.sh: Android's process groups in a Linux without Android
# (make android-check's GKI VM: scripts/kernel-vm.sh runs `setup` before
# the tests when it stages this script), as Android's libprocessgroup
# declares them in system/core's libprocessgroup/profiles (AOSP main,
# read 2026-11-26): cgroups.json's hierarchies and init.rc's groups, and
# task_profiles.json's aggregate profiles that ActivityManager applies to
# a process (SetProcessProfiles) as its app changes state.
#
#   android-cgroups.sh setup                 mount and make the groups
#   android-cgroups.sh apply PROFILE PID     apply an aggregate profile
#   android-cgroups.sh teardown              every task back to the roots, unmount
#
# cgroups.json: blkio at /dev/blkio (0755), cpu at /dev/cpuctl (0755),
# cpuset at /dev/cpuset (0755), memory at /dev/memcg (0700), all cgroup
# v1; cgroup v2 at /sys/fs/cgroup with the freezer (the per-app
# uid_<UID>/pid_<PID> groups). Owner system:system (uid 1000) as there.
# The profiles' actions here: JoinCgroup (the pid into the group's
# cgroup.procs: cpuset, cpu, blkio) and SetTimerSlack
# (/proc/PID/timerslack_ns); the attributes (uclamp, memory limits) are
# left out: lanes reads none of them.
set -eu
SYSTEM=1000
CPUSETS="foreground background system-background top-app restricted camera-daemon"
CPUCTLS="top-app foreground background system system-background rt camera-daemon"

# mounted PATH: a mount point (from /proc/mounts: busybox builds without
# the mountpoint applet, such as Debian's busybox-static in the VM)
mounted() { grep -q "^[^ ]* $1 " /proc/mounts; }

v1() { # controller path mode
	mkdir -p "$2"
	mounted "$2" || mount -t cgroup -o "$1" none "$2"
	chmod "$3" "$2"; chown "$SYSTEM:$SYSTEM" "$2" 2>/dev/null || true
}

group() { # hierarchy name: a group with its parent's cpus and mems (cpuset)
	mkdir -p "$1/$2"
	for f in cpuset.cpus cpuset.mems; do
		[ ! -f "$1/$f" ] || cat "$1/$f" > "$1/$2/$f"
	done
	chown -R "$SYSTEM:$SYSTEM" "$1/$2" 2>/dev/null || true
}

setup() {
	v1 blkio /dev/blkio 0755
	v1 cpu /dev/cpuctl 0755
	v1 cpuset /dev/cpuset 0755
	v1 memory /dev/memcg 0700
	mounted /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
	# init.rc's groups
	for g in $CPUSETS; do group /dev/cpuset "$g"; done
	for g in $CPUCTLS; do group /dev/cpuctl "$g"; done
	group /dev/blkio background
}

join() { # controller-root group pid: task_profiles.json's JoinCgroup
	# one write, appending (no O_TRUNC, as libprocessgroup's kept
	# descriptor): one IN_MODIFY for the watchers of the file
	dir=$1${2:+/$2}
	printf %s "$3" >> "$dir/cgroup.procs"
}

apply() { # the aggregate profiles of task_profiles.json
	pid=$2
	case "$1" in
	CPUSET_SP_TOP_APP)    join /dev/cpuctl top-app "$pid"; join /dev/cpuset top-app "$pid"; join /dev/blkio "" "$pid"; slack 50000 ;;
	CPUSET_SP_FOREGROUND) join /dev/cpuctl foreground "$pid"; join /dev/cpuset foreground "$pid"; join /dev/blkio "" "$pid"; slack 50000 ;;
	CPUSET_SP_BACKGROUND) join /dev/cpuctl background "$pid"; join /dev/cpuset background "$pid"; join /dev/blkio background "$pid"; slack 40000000 ;;
	CPUSET_SP_SYSTEM)     join /dev/cpuset system-background "$pid"; slack 50000 ;;
	CPUSET_SP_RESTRICTED) join /dev/cpuset restricted "$pid"; slack 50000 ;;
	CPUSET_SP_DEFAULT)    join /dev/cpuset "" "$pid"; slack 50000 ;;
	*) echo "android-cgroups: unknown profile $1" >&2; exit 2 ;;
	esac
}

slack() { [ ! -w "/proc/$pid/timerslack_ns" ] || echo "$1" > "/proc/$pid/timerslack_ns"; }

teardown() { # only the groups setup made
	for hg in $(for g in $CPUSETS; do echo /dev/cpuset:$g; done; for g in $CPUCTLS; do echo /dev/cpuctl:$g; done) /dev/blkio:background; do
		h=${hg%%:*} d=${hg%%:*}/${hg#*:}
		[ -d "$d" ] || continue
		while read -r t; do echo "$t" > "$h/tasks" 2>/dev/null || true; done < "$d/tasks"
		rmdir "$d"
	done
	for h in /dev/blkio /dev/cpuctl /dev/cpuset /dev/memcg; do ! mounted "$h" || umount "$h"; done
}

case "${1:-}" in
setup) setup ;;
apply) [ $# -eq 3 ] || { echo "usage: $0 apply PROFILE PID" >&2; exit 2; }; apply "$2" "$3" ;;
teardown) teardown ;;
*) echo "usage: $0 setup | apply PROFILE PID | teardown" >&2; exit 2 ;;
esac
