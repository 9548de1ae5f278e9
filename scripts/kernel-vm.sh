#!/usr/bin/env bash
# scripts/kernel-vm.sh [PKG...]: boot a Debian kernel in qemu and run lanes
# there: `lanes doctor`, then the tests of each PKG (default: the BPF
# objects, the datapath, the daemon, the monitor), as root in the VM. The
# check behind "lanes runs on 5.10 with named features off" and of what a
# current kernel adds: it exercises the kernel's own verifier, helpers and
# qdiscs, which CO-RE relocation (internal/bpf/coretest) cannot.
#
#   make kernel-check                          every kernel below
#   KERNEL=7.2 scripts/kernel-vm.sh ./internal/datapath/ -- -test.run TestX
#   KERNEL=gki-6.12 ARCH=arm64 scripts/kernel-vm.sh   GKI android16-6.12's
#       config (scripts/gki-kernel.sh builds it; make android-check)
#   KERNEL=7.2 scripts/kernel-vm.sh ./internal/lab/rt/   the rt experiment's (b):
#       lanes switches the preemption model to full and back (PREEMPT_DYNAMIC)
#
# KERNEL: 5.10 (Debian 11, the default) or 7.2 (Debian's current cloud
# kernel). ARCH: amd64 (the default) or arm64 (7.2 only: Debian's
# cloud-arm64 kernel under qemu-system-aarch64 -M virt -cpu max, with
# GOARCH=arm64 binaries and Debian 12's arm64 busybox and iproute2 as the
# user space). Packages are resolved from the archive's signed index (the
# versions used are printed) and cached in $LANES_CACHE
# (default ~/.cache/lanes). qemu runs without KVM (TCG: ~10 s to boot,
# tests ~5x slower than native, arm64 slower still), so the VM is for
# correctness, never for timing figures. Modules the tests need are
# insmod'ed from the package.
# Exit status: 0 when doctor names no missing needed feature and every
# test binary passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
arch=${ARCH:-amd64}
case "$arch" in amd64) ./scripts/deps.sh vm ;; arm64) ./scripts/deps.sh vm-arm64 ;;
  *) echo "kernel-vm: ARCH is amd64 or arm64" >&2; exit 2 ;; esac

# In insmod order (a module after those it depends on). A Debian system
# loads these on first use; the VM has no modprobe. inet_diag, tcp_diag and
# udp_diag: sock_diag for TCP and UDP (the monitor's and the live socket
# moves' backend on 5.10); ifb, act_mirred, cls_u32: the shaped-mode tests' ingress redirect;
# llc, stp, bridge: the coop tests' shared segment.
modules=(net/sched/sch_htb net/sched/sch_tbf net/sched/sch_ingress net/sched/cls_bpf
         net/sched/act_bpf net/sched/sch_fq net/sched/sch_prio
         net/sched/sch_netem drivers/net/veth drivers/net/tun net/ipv4/tcp_bbr
         net/ipv4/inet_diag net/ipv4/tcp_diag net/ipv4/udp_diag drivers/net/ifb net/sched/act_mirred
         net/sched/cls_u32 net/llc/llc net/802/stp net/bridge/bridge)
# The kernel's packages are resolved from the archive's signed index
# (scripts/debian-index.sh: InRelease verified with gpgv, Packages by its
# sha256, each .deb by the sha256 Packages gives), so the check follows the
# archive instead of failing when a pinned version is dropped; the version
# used is printed and kept in the cache ($cache/resolved).
. "$here/scripts/debian-index.sh"
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
case "${KERNEL:-5.10}/$arch" in
  5.10/amd64)
    # Debian 11's kernel: the unsigned image of linux-image-amd64's.
    src=("$mirror|bullseye") meta=linux-image-amd64 kparts=(linux-image-@-unsigned)
    modules+=(net/sched/sch_fq_codel) ;;
  7.2/amd64|current/amd64|7.2/arm64|current/arm64)
    # Debian's current cloud kernel (unstable), split packages: the image
    # in linux-binary, the modules, the config in linux-base. fq_codel and
    # the BPF qdisc are built in; cake and etf are not. The arm64 image is
    # an uncompressed Image; its config matches the amd64 cloud one in what
    # the tests load, but without PREEMPT_DYNAMIC.
    src=("$mirror|unstable") meta=linux-image-cloud-$arch kparts=(linux-binary-@ linux-modules-@ linux-base-@)
    modules+=(net/sched/sch_cake net/sched/sch_etf) ;;
  gki-6.12/arm64)
    # GKI android16-6.12's networking, BPF, cgroup and scheduling config on
    # Debian's 6.12 source, built (and cached) by scripts/gki-kernel.sh:
    # everything built in, no modules, no package to resolve.
    version=gki-6.12 debs=() modules=() ;;
  *) echo "kernel-vm: KERNEL/ARCH is 5.10/amd64, 7.2/amd64, 7.2/arm64 (7.2: current) or gki-6.12/arm64" >&2; exit 2 ;;
esac
cachetop=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}
record=$cachetop/kernels/resolved-${KERNEL:-5.10}-$arch
# resolve_kernel: version and debs ("VERSION URL SHA256 SUITE" each) from
# the index, recorded; offline, the last record (its packages are cached).
resolve_kernel() {
  local image p
  if image=$(deb_depends_on "$arch" "$meta" linux-image- "${src[@]}"); then
    version=${image#linux-image-} debs=()
    for p in "${kparts[@]}"; do
      p=${p//@/$version}
      debs+=("$(deb_resolve "$arch" "$p" "${src[@]}")") || return 1
    done
    mkdir -p "$(dirname "$record")"
    { echo "$version"; printf '%s\n' "${debs[@]}"; } >"$record"
  elif [ -s "$record" ]; then
    echo "kernel-vm: the index is unreachable: using the last resolved kernel ($record)" >&2
    version=$(head -1 "$record"); mapfile -t debs < <(tail -n +2 "$record")
  else
    return 1
  fi
}
[ "${version:-}" = gki-6.12 ] || resolve_kernel || { echo "kernel-vm: cannot resolve $meta from ${src[*]}" >&2; exit 1; }
for d in "${debs[@]}"; do # (not set --: the arguments are the packages to test)
  read -r _ url sha suite <<<"$d"; echo "kernel-vm: ${url##*/} ($suite, sha256 $sha)" >&2
done
# The arm64 user space: Debian 12's packages of the tools the tests run
# (busybox for the shell, iproute2's ip, tc and ss, nsenter and setpriv,
# a real sleep)
# and the libraries they link, resolved as the kernel is (bookworm, its
# updates and its security suite: the highest version).
userland_arm64=(busybox-static iproute2 util-linux coreutils libbpf1 libelf1 libmnl0 libbsd0 libmd0 libcap2 libcap-ng0 libc6 zlib1g libxtables12 libselinux1 libpcre2-8-0 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0 libkeyutils1)
tools=(ip tc nsenter ss sleep setpriv) # setpriv: an app's uid (the Android test)

pkgs=() testargs=()
while [ $# -gt 0 ]; do
  case "$1" in --) shift; testargs=("$@"); break ;; *) pkgs+=("$1"); shift ;; esac
done
default=0
[ ${#pkgs[@]} -gt 0 ] || { default=1; pkgs=(./internal/bpf/classifier/ ./internal/bpf/sockops/ ./internal/bpf/tcpevents/
  ./internal/bpf/ledbat/ ./internal/bpf/capcc/ ./internal/bpf/tcpiter/ ./internal/bpf/netnscookie/ ./internal/bpf/edfqdisc/ ./internal/features/
  ./internal/datapath/ ./internal/rledbat/ ./internal/tcpmon/ ./internal/daemon/); }
# The daemon package on arm64 (default list): the tests of what differs
# there from x86-64, where the whole package runs on the same kernel: the
# arm64 daemon's start, status and clean stop (TestLifecycle), system
# calls and structs per architecture (a raw setresuid in one thread:
# TestMoveByThreadIDNeedsWholeGroup; SO_PEERCRED and SO_PEERGROUPS:
# TestAttackGroupFromPID; the proc connector: TestProcessLaneRule;
# pidfd_getfd: TestDownloadProtectionStatus; the realtime lane's raw
# system calls and SCM_RIGHTS: TestRealtimeLaneInDaemon; sock_diag:
# TestSocketLanes), struct_ops registered by map update and removed after
# SIGKILL (TestMapUpdateCCsAfterSIGKILL), the device queue's state across
# a crash (TestCrashRestartKeepsShortQueue) and the daemon without
# sock_ops (TestDaemonWithoutSockops). The whole package takes 1106 s
# there alone, and over 20 minutes on x86-64 beside other work.
daemon_arm64='^(TestLifecycle|TestMoveByThreadIDNeedsWholeGroup|TestThreadHelper|TestAttackGroupFromPID|TestAttackHelper|TestProcessLaneRule|TestDownloadProtectionStatus|TestRealtimeLaneInDaemon|TestSocketLanes|TestMapUpdateCCsAfterSIGKILL|TestCrashRestartKeepsShortQueue|TestDaemonWithoutSockops)$'
# The GKI check also runs Android's app states: the watcher on Android's
# cgroups (scripts/android-cgroups.sh sets them up in the VM) and the
# daemon's test of an app's upload following its state.
if [ "$version/$default" = gki-6.12/1 ]; then
  pkgs+=(./internal/appstate/)
  daemon_arm64=${daemon_arm64%')$'}'|TestAndroidAppStateRemoteBottleneck)$'
fi
# Switching the preemption model rewrites the kernel's code (static calls
# and keys, patched through int3) while the other vCPU runs it: under
# multi-threaded TCG that vCPU executed a stale int3 and the guest panicked
# ("Oops: int3" at a patched site, 2 of 3 runs of the rt package), so a
# list with a package that switches it runs on one TCG thread.
accel=()
case " ${pkgs[*]} " in *"/internal/lab/rt"*) accel=(-accel tcg,thread=single) ;; esac

# fetch_kernel: download the pinned packages and cache the kernel image,
# the config and the modules (uncompressed: busybox insmod reads plain .ko).
fetch_kernel() {
  mkdir -p "$cache"
  local tmp; tmp=$(mktemp -d)
  for d in "${debs[@]}"; do
    deb_fetch "$d" "$tmp/p.deb"
    dpkg-deb -x "$tmp/p.deb" "$tmp/x"
    rm -f "$tmp/p.deb"
  done
  local mods; mods=$(find "$tmp/x" -type d -path "*/modules/$version/kernel")
  rm -rf "$cache/modules"; mkdir -p "$cache/modules"
  for m in "${modules[@]}"; do
    if [ -f "$mods/$m.ko.xz" ]; then xz -dc "$mods/$m.ko.xz" > "$cache/modules/$(basename "$m").ko"
    else cp "$mods/$m.ko" "$cache/modules/"; fi
  done
  cp "$(find "$tmp/x" -name "vmlinuz*" -type f | head -1)" "$cache/vmlinuz"
  cp "$(find "$tmp/x" \( -name "config-$version" -o -path "*/$version/config" \) | head -1)" "$cache/config"
  rm -rf "$tmp"
}
# The tests run iproute2's ip (netns exec), tc and ss, and a real sleep (a
# copy of busybox under another name is no sleep).
# userland_amd64 ROOT: the host's busybox and tools, with their shared
# libraries (they are user space; only the kernel differs).
userland_amd64() {
  cp "$(command -v busybox)" "$1/bin/busybox"
  local b bin lib
  for b in "${tools[@]}"; do
    bin=$(command -v "$b"); cp "$bin" "$1/bin/"
    for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do mkdir -p "$1$(dirname "$lib")"; cp -L "$lib" "$1$lib"; done
  done
}
# userland_arm64 ROOT: the pinned arm64 packages, unpacked once into the
# cache; the tools and every library (the loader's default multiarch
# directories, as on the host).
userland_arm64() {
  local root=$1 dir=$cachetop/userland/bookworm-arm64 resolved=() p d tmp
  local srcs=("$mirror|bookworm" "$mirror|bookworm-updates" "http://security.debian.org/debian-security|bookworm-security")
  if resolved=($(for p in "${userland_arm64[@]}"; do deb_resolve arm64 "$p" "${srcs[@]}" | tr ' ' '!' || exit 1; done)); then
    # one folder per resolved set: an update unpacks anew, the old is kept
    dir=$dir-$(printf '%s\n' "${resolved[@]}" | sha256sum | cut -c1-12)
  else
    dir=$(ls -d "$dir"-*/done 2>/dev/null | head -1 | xargs -r dirname)
    [ -n "$dir" ] || { echo "kernel-vm: cannot resolve the arm64 user space" >&2; return 1; }
    echo "kernel-vm: the index is unreachable: using the cached arm64 user space $dir" >&2
  fi
  if [ ! -f "$dir/done" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    tmp=$(mktemp -d)
    for d in "${resolved[@]}"; do
      deb_fetch "${d//!/ }" "$tmp/p.deb"
      dpkg-deb -x "$tmp/p.deb" "$dir/x"
      rm -f "$tmp/p.deb"
    done
    rm -rf "$tmp"; printf '%s\n' "${resolved[@]}" | tr '!' ' ' >"$dir/done"
  fi
  local x=$dir/x b
  cp "$x/bin/busybox" "$root/bin/busybox"
  for b in "${tools[@]}"; do cp "$(find "$x/bin" "$x/sbin" "$x/usr/bin" "$x/usr/sbin" -name "$b" -type f | head -1)" "$root/bin/"; done
  mkdir -p "$root/lib" "$root/usr/lib"
  cp -a "$x/lib/aarch64-linux-gnu" "$x/lib/ld-linux-aarch64.so.1" "$root/lib/"
  cp -a "$x/usr/lib/aarch64-linux-gnu" "$root/usr/lib/"
}
cache=$cachetop/kernels/$version
# The GKI-configured kernel is built here, not fetched: its Image is the
# kernel qemu boots; its release names the config file doctor reads.
if [ "$version" = gki-6.12 ]; then
  cache=$(./scripts/gki-kernel.sh)
  ln -sf Image "$cache/vmlinuz"
  version=$(grep -a -m1 -o 'Linux version [^ ]*' "$cache/Image" | cut -d' ' -f3)
fi
missing=0
for m in "${modules[@]}"; do [ -f "$cache/modules/$(basename "$m").ko" ] || missing=1; done
[ -f "$cache/vmlinuz" ] && [ -f "$cache/config" ] || missing=1
[ $missing = 0 ] || fetch_kernel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,proc,sys,dev,tmp,run,etc,lib/modules,t}
mkdir -p "$root/var" && ln -s /run "$root/var/run"
userland_$arch "$root"
[ ${#modules[@]} -eq 0 ] || cp "$cache"/modules/*.ko "$root/lib/modules/"
# The build config where a Debian system has it: doctor reads HZ, the
# preemption model and the proc connector from it (without it: HZ measured,
# proc connector "false").
mkdir -p "$root/boot" && cp "$cache/config" "$root/boot/config-$version"
for m in "${modules[@]}"; do basename "$m"; done > "$root/lib/modules/order"
# The users and groups the tests name (a Debian system's first entries).
printf 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nusers:x:100:\nnogroup:x:65534:\n' > "$root/etc/group"
export GOARCH=$arch CGO_ENABLED=0
./scripts/go build -o "$root/bin/lanes" ./cmd/lanes
# lanes-rtd, the realtime lane's data path (C), static for the VM's
# architecture, beside lanes and beside the test binaries, where the lane
# finds it as beside an installed lanes.
rtdcc=cc; [ "$arch" = arm64 ] && rtdcc=aarch64-linux-gnu-gcc
make -s -B rtd OUT="$root/bin" CC="$rtdcc" RTD_LDFLAGS=-static
mkdir -p "$root/t" && cp "$root/bin/lanes-rtd" "$root/t/"
# lanes' own BPF objects where a test of a package beside them reads them
# (internal/bpf/android's: ../classifier/classifier_bpfel.o):
# /t/bpf/<package>/.
for o in internal/bpf/*/*_bpfel.o; do
  d=$(dirname "${o#internal/}"); mkdir -p "$root/t/$d" && cp "$o" "$root/t/$d/"
done
for p in "${pkgs[@]}"; do
  name=$(echo "$p" | sed 's|^\./internal/||; s|/$||; s|/|_|g')
  ./scripts/go test -c -o "$root/t/$name.test" "$p"
  # A test runs in its package's directory (go test's rule): testdata too.
  # A package under internal/bpf/ runs in /t/bpf/<package> (/t/NAME.d links
  # there), beside the objects staged above and below.
  rel=$(echo "$p" | sed 's|^\./internal/||; s|/$||')
  case "$rel" in
    bpf/*) mkdir -p "$root/t/$rel" && ln -sfn "$rel" "$root/t/$name.d" ;;
    *) mkdir -p "$root/t/$name.d" ;;
  esac
  [ ! -d "$p/testdata" ] || cp -r "$p/testdata" "$root/t/$name.d/"
done
# The documents tests compare with (a table the code must match), where a
# test in internal/PKG finds them: /t/PKG.d/../../docs.
mkdir -p "$root/docs" && cp docs/*.md "$root/docs/"
# The example policies a test starts a daemon with (the Android policy:
# /t/PKG.d/../../examples/policies).
mkdir -p "$root/examples" && cp -r examples/policies "$root/examples/"
# The Android-form BPF objects the pinned-path tests load the way
# Android's loader would, where internal/PKG finds them:
# /t/PKG.d/../bpf/android/objects.
mkdir -p "$root/t/bpf/android/objects" && cp internal/bpf/android/objects/*.o "$root/t/bpf/android/objects/"
printf '%s\n' "${testargs[@]}" > "$root/t/args"
# (KERNEL, not version: version is the built kernel's release by now)
[ "${KERNEL:-}" != gki-6.12 ] || cp scripts/android-cgroups.sh "$root/t/"
if [ "$arch/$default/${#testargs[@]}" = arm64/1/0 ]; then
  echo "$daemon_arm64" > "$root/t/daemon.run"
  echo "kernel-vm: arm64 runs the daemon package's $daemon_arm64 (the whole package runs on x86-64)" >&2
fi
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin 2>/dev/null # keeps ip, tc, nsenter, ss, sleep
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp; mount -t tmpfs run /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug; mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
for m in $(cat /lib/modules/order); do insmod "/lib/modules/$m.ko"; done
ip link set lo up
if [ -f /t/android-cgroups.sh ]; then # Android's cgroups (the GKI check)
  sh /t/android-cgroups.sh setup; echo "== android cgroups rc=$?"
  export LANES_ANDROID_CGROUPS=/t/android-cgroups.sh
fi
export PATH=/bin LANES_TEST_BIN=/bin/lanes LANES_BIN=/bin/lanes LANES_TIMING=unjudged HOME=/tmp
echo "== kernel $(uname -r)"
/bin/lanes doctor -v; echo "== doctor rc=$?"
set -- $(cat /t/args)
for t in /t/*.test; do
  [ -f "$t" ] || continue
  echo "== test $(basename "$t" .test)"; t0=$(date +%s)
  run=; [ ! -f "${t%.test}.run" ] || run=-test.run=$(cat "${t%.test}.run") # the daemon's on arm64
  (cd "${t%.test}.d" && "$t" -test.v -test.count 1 -test.timeout 45m $run "$@" 2>&1; echo "== rc $?") | tee /tmp/out | grep -v -E '^=== (RUN|PAUSE|CONT)|^ +--- PASS'
  echo "== tests $(grep -c '^--- PASS' /tmp/out) $(grep -c '^--- SKIP' /tmp/out) $(grep -c '^--- FAIL' /tmp/out)"
  echo "== time $(basename "$t" .test) $(( $(date +%s) - t0 ))s"
done
echo "== done"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"
log=${LANES_VM_LOG:-$work/console.log}
echo "kernel-vm: booting $version (qemu, TCG${accel:+ on one thread}); console in $log" >&2
case "$arch" in
  amd64) qemu=(qemu-system-x86_64) console=ttyS0 ;;
  arm64) qemu=(qemu-system-aarch64 -M virt -cpu max) console=ttyAMA0 ;;
esac
timeout "${LANES_VM_TIMEOUT:-5400}" "${qemu[@]}" "${accel[@]}" -kernel "$cache/vmlinuz" -initrd "$work/initrd.gz" \
  -append "console=$console quiet panic=-1" -nographic -m 3072 -smp 2 -no-reboot >"$log" 2>&1 || true
# From the first line of ours on; the console's own escape sequences (a
# terminal reset) precede it on its line.
tr -d '\r' < "$log" | sed -n '/== kernel /,$ { s/^.*== kernel /== kernel /; p }'
# Per kernel, doctor's table: the features present, and each absent one
# with what lanes does without it (columns are two or more spaces apart).
tr -d '\r' < "$log" | awk -v k="$version" '/^feature +state/{t=1; next} t && /^$/{t=0}
  t{n=split($0, c, /  +/); if (c[2]=="yes") y=y (y==""?"":", ") c[1]; else printf "kernel-vm: %s absent: %s (%s)%s\n", k, c[1], c[2], (n>2?": " c[3]:"")}
  /^scheduler: /{sub(/ \(from .*/, ""); s=$0} END{printf "kernel-vm: %s present: %s\nkernel-vm: %s %s\n", k, y, k, s}' >&2
# Per test binary: passed or failed, its top-level tests passed, skipped
# and failed, and its time in the VM.
# A binary the VM's time ran out in is named as unfinished.
tr -d '\r' < "$log" | awk -v k="$version" '/^== test /{t=$3; open=t} /^== rc /{r[t]=$3} /^== tests /{c=sprintf("%d of %d tests passed, %d skipped, %d failed", $3, $3+$4+$5, $4, $5)}
  /^== time /{n++; open=""; p+=(r[$3]=="0"); printf "kernel-vm: %s %s %s %s (%s)\n", k, $3, (r[$3]=="0"?"passed":"FAILED"), $4, c}
  END{if (open!="") {n++; printf "kernel-vm: %s %s DID NOT FINISH (the VM was stopped)\n", k, open}
    printf "kernel-vm: %s: %d of %d test binaries passed\n", k, p, n}' >&2
grep -q '^== done' "$log" || { echo "kernel-vm: the VM did not finish (see $log)" >&2; exit 1; }
! grep -q -E '^== doctor rc=[1-9]|^== rc [1-9]' "$log"
