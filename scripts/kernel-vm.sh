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
# user space). Packages are pinned by sha256 and cached in $LANES_CACHE
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
# loads these on first use; the VM has no modprobe. inet_diag and tcp_diag:
# sock_diag for TCP (the monitor's and the live socket moves' backend on
# 5.10); ifb, act_mirred, cls_u32: the shaped-mode tests' ingress redirect;
# llc, stp, bridge: the coop tests' shared segment.
modules=(net/sched/sch_htb net/sched/sch_tbf net/sched/sch_ingress net/sched/cls_bpf
         net/sched/act_bpf net/sched/sch_fq net/sched/sch_prio
         net/sched/sch_netem drivers/net/veth drivers/net/tun net/ipv4/tcp_bbr
         net/ipv4/inet_diag net/ipv4/tcp_diag drivers/net/ifb net/sched/act_mirred
         net/sched/cls_u32 net/llc/llc net/802/stp net/bridge/bridge)
pool=${DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/main/l
case "${KERNEL:-5.10}/$arch" in
  5.10/amd64)
    version=5.10.0-32-amd64
    debs=("linux/linux-image-${version}-unsigned_5.10.223-1_amd64.deb 53a0ada535b8b35b3ee80ead5ab88036591963941c42dff6881bdb741deebead")
    modules+=(net/sched/sch_fq_codel) ;;
  7.2/amd64)
    # Split packages: the image in linux-binary, the modules, the config in
    # linux-base. fq_codel and the BPF qdisc are built in; cake and etf are not.
    version=7.2.13+deb14-cloud-amd64
    debs=("linux-signed-amd64/linux-binary-${version}_7.2.13-1_amd64.deb 03e41f1c34c16583462f029e81944a85ebcdb78098c258dedfa1cfdd680a27f8"
          "linux/linux-modules-${version}_7.2.13-1_amd64.deb 97d79546041e3fdfb44dccff180938894d1bf8eb298f091f88539c1b37080bef"
          "linux/linux-base-${version}_7.2.13-1_amd64.deb c41b217e1a4e321f5eff028e965ea25f5da8a74cd3683ca7f4bacedc59e0ecc5")
    modules+=(net/sched/sch_cake net/sched/sch_etf) ;;
  7.2/arm64)
    # The same split; the image is an uncompressed arm64 Image. Its config
    # matches the amd64 cloud one in what the tests load (fq_codel and the
    # BPF qdisc built in), but without PREEMPT_DYNAMIC.
    version=7.2.13+deb14-cloud-arm64
    debs=("linux-signed-arm64/linux-binary-${version}_7.2.13-1_arm64.deb 6468b94955d8b5e8a2b3b36a826851ad0aa431c7340f6401e20b065dc08e4f5d"
          "linux/linux-modules-${version}_7.2.13-1_arm64.deb e356ce4b166e33d7d9a14683bf10e18265ba9b1b255bfcb963b19be5d42cb0fa"
          "linux/linux-base-${version}_7.2.13-1_arm64.deb da2305e9c9864712159da53bcf077a08a63d863aab030e7805dd0138adf9b273")
    modules+=(net/sched/sch_cake net/sched/sch_etf) ;;
  gki-6.12/arm64)
    # GKI android16-6.12's networking, BPF, cgroup and scheduling config on
    # Debian's 6.12 source, built (and cached) by scripts/gki-kernel.sh:
    # everything built in, no modules, no package to fetch.
    version=gki-6.12 debs=() modules=() ;;
  *) echo "kernel-vm: KERNEL/ARCH is 5.10/amd64, 7.2/amd64, 7.2/arm64 or gki-6.12/arm64" >&2; exit 2 ;;
esac
# The arm64 user space: Debian 12's packages of the tools the tests run
# (busybox for the shell, iproute2's ip, tc and ss, nsenter, a real sleep)
# and the libraries they link, pinned by sha256 (pool path, sha256).
userland_arm64=(
  "main/b/busybox/busybox-static_1.35.0-4+deb12u1+b1_arm64.deb 732c9135564fc71337e0e05fb4da4d11e6c28c1834bce3e405e575afef2a52f5"
  "main/i/iproute2/iproute2_6.1.0-3_arm64.deb 58fad55c5a29be6c1e6301d0c572f2ac5e5962ff244e7da3784c1b29ffc6c6bf"
  "main/u/util-linux/util-linux_2.38.1-5+deb12u3_arm64.deb c30366915d4dc21106d69c3d5a2bf6b010c4c2ff508a1231ede4620aed9874fc"
  "main/c/coreutils/coreutils_9.1-1_arm64.deb ec8f090a14c684879dce251254d8d9ed0876d4480f750d5807ef04e5435e1c4d"
  "main/libb/libbpf/libbpf1_1.1.2-0+deb12u1_arm64.deb c9929839798e7d8e66b212f345ecf1653ba7f1a9e1b753d0eb67bd521b0b5511"
  "main/e/elfutils/libelf1_0.188-2.1_arm64.deb 32971952d8f5d563447bf275f24e26057500924da2d855c1edb53b0f0400bd11"
  "main/libm/libmnl/libmnl0_1.0.4-3_arm64.deb d63aafb6f2c07db8fcb135b00ff915baf72ef8a3397e773c9c24d67950c6a46c"
  "main/libb/libbsd/libbsd0_0.11.7-2_arm64.deb ef00f132ddd268ee67d756998723ee18543db27ab34930c0a9f1cff75cf55382"
  "main/libm/libmd/libmd0_1.0.4-2_arm64.deb 99a8c7dd591fae9fb37d8bf8dfdffa850e207fa405b3198c5b24711a5f972381"
  "main/libc/libcap2/libcap2_2.66-4+deb12u3+b1_arm64.deb b3a21ae1cef9c2f3fa340007100fb0aa934ab6a4d8aed131660de9713db2bb6e"
  "main/g/glibc/libc6_2.36-9+deb12u14_arm64.deb 01f4330719fd4f65580e16ea5a0527f372fca750e8f588d26deaf09f2d3b1cf4"
  "main/z/zlib/zlib1g_1.2.13.dfsg-1_arm64.deb 52b8b8a145bbe1956bba82034f77022cbef0c3d0885c9e32d9817a7932fe1913"
  "main/i/iptables/libxtables12_1.8.9-2_arm64.deb 8884a42f98b989e5ba2e91d931b5c6e9eb72568e5d3001d97d73d7913890a7b3"
  "main/libs/libselinux/libselinux1_3.4-1+b6_arm64.deb 29201edf23ebae40844d6c289afdb9bba52f927d55096ed1b1cd37e040135edc"
  "updates/main/p/pcre2/libpcre2-8-0_10.42-1+deb12u2_arm64.deb 8498d2c0bd6747dfc2fc6eec62774a86967079555f7043d5a7b78ee4efbbc0fb"
  "main/libt/libtirpc/libtirpc3_1.3.3+ds-1_arm64.deb deaf9ea54f74cab6690b4bc0b427f05cbe62cc073580d84f5f18a8d9e2ece401"
  "main/k/krb5/libgssapi-krb5-2_1.20.1-2+deb12u5_arm64.deb a00678963f692a929312968f19b77a61a8fc0011690d7dc909a8a2c4810fc7b3"
  "main/k/krb5/libkrb5-3_1.20.1-2+deb12u5_arm64.deb c3c7227f5db903a7a8b8936d47d1d79643edcda36365c4c992e1a96bcc2d4c7e"
  "main/k/krb5/libk5crypto3_1.20.1-2+deb12u5_arm64.deb 8ae2c31cde0b3e6f80c573a495b0f90bf6d9efb4455d900728278bb54d9092e5"
  "main/e/e2fsprogs/libcom-err2_1.47.0-2+b2_arm64.deb 36c15f933a965b50f4c9558d792d9556934c84e532703935d8ae7e69dd3fa863"
  "main/k/krb5/libkrb5support0_1.20.1-2+deb12u5_arm64.deb 3043fd4a54b945a1b503170749527f825dcfc7add2f8bf5abb4a329deeb48f4a"
  "main/k/keyutils/libkeyutils1_1.6.3-2_arm64.deb aac46cb6faec4e737502b3c2290b7b02f8ba04e8accd5af7fd07934df0c867b1")
tools=(ip tc nsenter ss sleep)

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
# TestD11MoveByThreadID; SO_PEERCRED and SO_PEERGROUPS:
# TestAttackGroupFromPID; the proc connector: TestProcessLaneRule;
# pidfd_getfd: TestDownloadProtectionStatus; the realtime lane's raw
# system calls and SCM_RIGHTS: TestRealtimeLaneInDaemon; sock_diag:
# TestSocketLanes), struct_ops registered by map update and removed after
# SIGKILL (TestMapUpdateCCsAfterSIGKILL), the device queue's state across
# a crash (TestD4CrashRestartKeepsShortQueue) and the daemon without
# sock_ops (TestDaemonWithoutSockops). The whole package takes 1106 s
# there, near the 20-minute test timeout, and fails only a timing premise:
# TestCoopAttackReplayAfterRestart replays recordings to a restarted
# daemon within coop's 30-s clock-skew window, and under aarch64 TCG the
# restart ends past it (refused as stale, not as replayed).
daemon_arm64='^(TestLifecycle|TestD11MoveByThreadID|TestThreadHelper|TestAttackGroupFromPID|TestAttackHelper|TestProcessLaneRule|TestDownloadProtectionStatus|TestRealtimeLaneInDaemon|TestSocketLanes|TestMapUpdateCCsAfterSIGKILL|TestD4CrashRestartKeepsShortQueue|TestDaemonWithoutSockops)$'
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
    set -- $d
    curl -sSfL -o "$tmp/p.deb" "$pool/$1"
    echo "$2  $tmp/p.deb" | sha256sum -c --quiet
    dpkg-deb -x "$tmp/p.deb" "$tmp/x"
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
  local root=$1 dir=$cachetop/userland/bookworm-arm64
  if [ ! -f "$dir/done" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    local d tmp; tmp=$(mktemp -d)
    for d in "${userland_arm64[@]}"; do
      set -- $d
      curl -sSfL -o "$tmp/p.deb" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/$1" ||
        curl -sSfL -o "$tmp/p.deb" "http://security.debian.org/debian-security/pool/$1"
      echo "$2  $tmp/p.deb" | sha256sum -c --quiet
      dpkg-deb -x "$tmp/p.deb" "$dir/x"
    done
    rm -rf "$tmp"; touch "$dir/done"
  fi
  local x=$dir/x b
  cp "$x/bin/busybox" "$root/bin/busybox"
  for b in "${tools[@]}"; do cp "$(find "$x/bin" "$x/sbin" "$x/usr/bin" "$x/usr/sbin" -name "$b" -type f | head -1)" "$root/bin/"; done
  mkdir -p "$root/lib" "$root/usr/lib"
  cp -a "$x/lib/aarch64-linux-gnu" "$x/lib/ld-linux-aarch64.so.1" "$root/lib/"
  cp -a "$x/usr/lib/aarch64-linux-gnu" "$root/usr/lib/"
}
cachetop=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}
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
for p in "${pkgs[@]}"; do
  name=$(echo "$p" | sed 's|^\./internal/||; s|/$||; s|/|_|g')
  ./scripts/go test -c -o "$root/t/$name.test" "$p"
  # A test runs in its package's directory (go test's rule): testdata too.
  mkdir -p "$root/t/$name.d"
  [ ! -d "$p/testdata" ] || cp -r "$p/testdata" "$root/t/$name.d/"
done
printf '%s\n' "${testargs[@]}" > "$root/t/args"
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
export PATH=/bin LANES_TEST_BIN=/bin/lanes LANES_BIN=/bin/lanes LANES_TIMING=unjudged HOME=/tmp
echo "== kernel $(uname -r)"
/bin/lanes doctor; echo "== doctor rc=$?"
set -- $(cat /t/args)
for t in /t/*.test; do
  [ -f "$t" ] || continue
  echo "== test $(basename "$t" .test)"; t0=$(date +%s)
  run=; [ ! -f "${t%.test}.run" ] || run=-test.run=$(cat "${t%.test}.run") # the daemon's on arm64
  (cd "${t%.test}.d" && "$t" -test.v -test.count 1 -test.timeout 20m $run "$@" 2>&1; echo "== rc $?") | tee /tmp/out | grep -v -E '^=== (RUN|PAUSE|CONT)|^ +--- PASS'
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
timeout "${LANES_VM_TIMEOUT:-3600}" "${qemu[@]}" "${accel[@]}" -kernel "$cache/vmlinuz" -initrd "$work/initrd.gz" \
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
