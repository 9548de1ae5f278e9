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
#
# KERNEL: 5.10 (Debian 11, the default) or 7.2 (Debian's current cloud
# kernel). Packages are pinned by sha256 and cached in $LANES_CACHE
# (default ~/.cache/lanes). qemu runs without KVM (TCG: ~10 s to boot,
# tests ~5x slower than native), so the VM is for correctness, never for
# timing figures. Modules the tests need are insmod'ed from the package.
# Exit status: 0 when doctor names no missing needed feature and every
# test binary passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
./scripts/deps.sh vm

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
case "${KERNEL:-5.10}" in
  5.10)
    version=5.10.0-32-amd64
    debs=("linux/linux-image-${version}-unsigned_5.10.223-1_amd64.deb 53a0ada535b8b35b3ee80ead5ab88036591963941c42dff6881bdb741deebead")
    modules+=(net/sched/sch_fq_codel) ;;
  7.2)
    # Split packages: the image in linux-binary, the modules, the config in
    # linux-base. fq_codel and the BPF qdisc are built in; cake and etf are not.
    version=7.2.13+deb14-cloud-amd64
    debs=("linux-signed-amd64/linux-binary-${version}_7.2.13-1_amd64.deb 03e41f1c34c16583462f029e81944a85ebcdb78098c258dedfa1cfdd680a27f8"
          "linux/linux-modules-${version}_7.2.13-1_amd64.deb 97d79546041e3fdfb44dccff180938894d1bf8eb298f091f88539c1b37080bef"
          "linux/linux-base-${version}_7.2.13-1_amd64.deb c41b217e1a4e321f5eff028e965ea25f5da8a74cd3683ca7f4bacedc59e0ecc5")
    modules+=(net/sched/sch_cake net/sched/sch_etf) ;;
  *) echo "kernel-vm: KERNEL is 5.10 or 7.2" >&2; exit 2 ;;
esac

pkgs=() testargs=()
while [ $# -gt 0 ]; do
  case "$1" in --) shift; testargs=("$@"); break ;; *) pkgs+=("$1"); shift ;; esac
done
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./internal/bpf/classifier/ ./internal/bpf/sockops/ ./internal/bpf/tcpevents/
  ./internal/bpf/ledbat/ ./internal/bpf/capcc/ ./internal/bpf/tcpiter/ ./internal/bpf/netnscookie/ ./internal/bpf/edfqdisc/ ./internal/features/
  ./internal/datapath/ ./internal/rledbat/ ./internal/tcpmon/ ./internal/daemon/)

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
cache=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}/kernels/$version
missing=0
for m in "${modules[@]}"; do [ -f "$cache/modules/$(basename "$m").ko" ] || missing=1; done
[ -f "$cache/vmlinuz" ] || missing=1
[ $missing = 0 ] || fetch_kernel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,proc,sys,dev,tmp,run,etc,lib/modules,t}
mkdir -p "$root/var" && ln -s /run "$root/var/run"
cp "$(command -v busybox)" "$root/bin/busybox"
# The tests run iproute2's ip (netns exec), tc and ss, and a real sleep (a
# copy of busybox under another name is no sleep): the host's, with their
# shared libraries (they are user space; only the kernel differs).
for b in ip tc nsenter ss sleep; do
  bin=$(command -v "$b"); cp "$bin" "$root/bin/"
  for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; done
done
cp "$cache"/modules/*.ko "$root/lib/modules/"
for m in "${modules[@]}"; do basename "$m"; done > "$root/lib/modules/order"
# The users and groups the tests name (a Debian system's first entries).
printf 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nusers:x:100:\nnogroup:x:65534:\n' > "$root/etc/group"
CGO_ENABLED=0 ./scripts/go build -o "$root/bin/lanes" ./cmd/lanes
for p in "${pkgs[@]}"; do
  name=$(echo "$p" | sed 's|^\./internal/||; s|/$||; s|/|_|g')
  CGO_ENABLED=0 ./scripts/go test -c -o "$root/t/$name.test" "$p"
  # A test runs in its package's directory (go test's rule): testdata too.
  mkdir -p "$root/t/$name.d"
  [ ! -d "$p/testdata" ] || cp -r "$p/testdata" "$root/t/$name.d/"
done
printf '%s\n' "${testargs[@]}" > "$root/t/args"
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin 2>/dev/null # keeps ip, tc, nsenter, ss, sleep
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp; mount -t tmpfs run /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug; mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
for m in $(cat /lib/modules/order); do insmod "/lib/modules/$m.ko"; done
ip link set lo up
export PATH=/bin LANES_TEST_BIN=/bin/lanes LANES_TIMING=unjudged HOME=/tmp
echo "== kernel $(uname -r)"
/bin/lanes doctor; echo "== doctor rc=$?"
set -- $(cat /t/args)
for t in /t/*.test; do
  [ -f "$t" ] || continue
  echo "== test $(basename "$t" .test)"; t0=$(date +%s)
  (cd "${t%.test}.d" && "$t" -test.v -test.count 1 -test.timeout 20m "$@" 2>&1; echo "== rc $?") | grep -v -E '^=== (RUN|PAUSE|CONT)|^ *--- PASS'
  echo "== time $(basename "$t" .test) $(( $(date +%s) - t0 ))s"
done
echo "== done"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"
log=${LANES_VM_LOG:-$work/console.log}
echo "kernel-vm: booting $version (qemu, TCG); console in $log" >&2
timeout 3600 qemu-system-x86_64 -kernel "$cache/vmlinuz" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1" -nographic -m 3072 -smp 2 -no-reboot >"$log" 2>&1 || true
# From the first line of ours on; the console's own escape sequences (a
# terminal reset) precede it on its line.
tr -d '\r' < "$log" | sed -n '/== kernel /,$ { s/^.*== kernel /== kernel /; p }'
# Per test binary: passed or failed, and its time in the VM.
tr -d '\r' < "$log" | awk -v k="$version" '/^== test /{t=$3} /^== rc /{r[t]=$3} /^== time /{n++; p+=(r[$3]=="0"); printf "kernel-vm: %s %s %s %s\n", k, $3, (r[$3]=="0"?"passed":"FAILED"), $4}
  END{printf "kernel-vm: %s: %d of %d test binaries passed\n", k, p, n}' >&2
grep -q '^== done' "$log" || { echo "kernel-vm: the VM did not finish (see $log)" >&2; exit 1; }
! grep -q -E '^== doctor rc=[1-9]|^== rc [1-9]' "$log"
