#!/bin/sh
# android-cgroups.sh: Android's process groups in a Linux without Android
# (make android-check's GKI VM: scripts/kernel-vm.sh runs `setup` before
# the tests when it stages this script), as Android's libprocessgroup
# declares them in system/core's libprocessgroup/profiles (AOSP main,
# read 2026-11-26): cgroups.json's hierarchies and init.rc's groups.
# task_profiles.json's aggregate profiles, which ActivityManager applies to
# a process (SetProcessProfiles) as its app changes state, are applied by
# the tests from their own process, as libprocessgroup writes them from
# ActivityManager's (internal/testutil/android.go: no shell's fork and exec
# between a move and its writes).
#
#   android-cgroups.sh setup                 mount and make the groups
#   android-cgroups.sh teardown              every task back to the roots, unmount
#
# cgroups.json: blkio at /dev/blkio (0755), cpu at /dev/cpuctl (0755),
# cpuset at /dev/cpuset (0755), memory at /dev/memcg (0700), all cgroup
# v1; cgroup v2 at /sys/fs/cgroup with the freezer (the per-app
# uid_<UID>/pid_<PID> groups). Owner system:system (uid 1000) as there.
# The profiles' actions applied: JoinCgroup (the pid into the group's
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
teardown) teardown ;;
*) echo "usage: $0 setup | teardown" >&2; exit 2 ;;
esac
