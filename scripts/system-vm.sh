#!/usr/bin/env bash
# scripts/system-vm.sh: `make system-check`, lanes as a user installs and
# runs it. Builds the .deb, boots a minimal Debian 12 system (systemd as
# PID 1, Debian's kernel) in qemu (TCG) and runs scripts/system-vm-guest.sh
# there: apt install of the package, systemctl enable --now, readiness,
# lanes status, a background transfer held by a foreground one across a
# veth pair into a network namespace, reload with a changed policy, the
# realtime lane (lanes-rtd in the unit's cgroup at SCHED_FIFO, a datagram
# with a deadline sent through it), restart, an upgrade to a newer build
# (the daemon restarted on the new binary, the policy kept), stop leaving
# nothing, the journal, systemd-analyze security, purge.
#
# The root file system comes from debootstrap (Debian's signed archive);
# the kernel package is resolved from the archive's signed index (the
# version used is printed). Both are cached, as a raw ext4
# image with the kernel and initrd beside it, in $LANES_CACHE (default
# ~/.cache/lanes)/system/; each run boots that image with writes discarded
# (snapshot) and a second disk holding the package, a newer build of it
# (Debian revision 2, for the upgrade step) and the steps.
# Exit status: 0 when every step passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
./scripts/deps.sh system

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
# The kernel: linux-image-amd64's, the highest of bookworm and its security
# suite, resolved from the archive's signed index (scripts/debian-index.sh);
# offline, the last one resolved (recorded in the cache).
. "$here/scripts/debian-index.sh"
ksrc=("$mirror|$suite" "http://security.debian.org/debian-security|$suite-security")
krecord=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}/system/resolved-kernel
if kimg=$(deb_depends_on amd64 linux-image-amd64 linux-image- "${ksrc[@]}") && kres=$(deb_resolve amd64 "$kimg" "${ksrc[@]}"); then
  mkdir -p "$(dirname "$krecord")"; echo "$kimg $kres" >"$krecord"
elif [ -s "$krecord" ]; then
  echo "system-check: the index is unreachable: using the last resolved kernel ($krecord)" >&2
  read -r kimg kres <"$krecord"
else
  echo "system-check: cannot resolve linux-image-amd64 from ${ksrc[*]}" >&2; exit 1
fi
kver=${kimg#linux-image-}
set -- $kres; kdeb=${2##*/}
echo "system-check: kernel $kdeb ($4, sha256 $3)" >&2
# kmod, linux-base, initramfs-tools: the kernel package's dependencies;
# iproute2, iperf3, bpftool, procps, socat: the steps' tools (socat: the
# realtime step's UDP listener).
include=systemd,systemd-sysv,udev,dbus,kmod,linux-base,initramfs-tools,iproute2,iperf3,procps,bpftool,socat
key=$(printf '%s %s %s\n' "$suite" "$kdeb" "$include" | sha256sum | cut -c1-12)
cache=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}/system
base=$cache/$suite-$key

# The unit that runs the steps from the check disk once the system is up.
check_unit() {
  cat <<'EOF'
[Unit]
Description=lanes system check: the steps on the check disk
DefaultDependencies=no
After=multi-user.target
ConditionPathExists=/dev/vdb

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /check && mount -o ro /dev/vdb /check && exec /check/run.sh'
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
EOF
}

# chroot_run ROOT CMD...: CMD in ROOT with /proc, /sys and /dev mounted.
chroot_run() {
  local root=$1; shift
  mount -t proc proc "$root/proc" && mount -t sysfs sys "$root/sys" && mount --bind /dev "$root/dev"
  local rc=0; chroot "$root" "$@" || rc=$?
  umount "$root/dev" "$root/sys" "$root/proc"
  return $rc
}

fetch_kernel() { # the resolved kernel package, cached
  deb_fetch "$kres" "$cache/$kdeb"
}

# build_base: debootstrap, the kernel and its initrd, the check unit; then
# the raw image. Its configuration: no login on the console, no network.
build_base() {
  local tmp; tmp=$(mktemp -d "$cache/build.XXXXXX")
  echo "system-check: debootstrap $suite ($include)" >&2
  debootstrap --variant=minbase --include="$include" "$suite" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
    { tail -20 "$tmp/debootstrap.log" >&2; return 1; }
  cp "$cache/$kdeb" "$tmp/root/tmp/"
  chroot_run "$tmp/root" dpkg -i "/tmp/$kdeb" >"$tmp/kernel.log" 2>&1 || { tail -20 "$tmp/kernel.log" >&2; return 1; }
  rm "$tmp/root/tmp/$kdeb"
  echo lanes-check > "$tmp/root/etc/hostname"
  ln -sf /dev/null "$tmp/root/etc/systemd/system/serial-getty@ttyS0.service"
  check_unit > "$tmp/root/etc/systemd/system/lanes-system-check.service"
  ln -s ../lanes-system-check.service "$tmp/root/etc/systemd/system/multi-user.target.wants/"
  chroot "$tmp/root" apt-get clean
  cp "$tmp/root/boot/vmlinuz-$kver" "$tmp/vmlinuz"; cp "$tmp/root/boot/initrd.img-$kver" "$tmp/initrd.img"
  mkfs.ext4 -q -L root -d "$tmp/root" "$tmp/rootfs.img" 2G
  rm -rf "$tmp/root"
  rm -rf "$base"; mv "$tmp" "$base"
}

# The policies on the check's veth: shaped at 20 and then 10 Mbit/s, the
# iperf3 port 5202 in the background lane; then 10 Mbit/s with the
# realtime lane, holding the CPU wake-up latency at 0 while clients are
# connected.
policy() {
  printf 'interfaces:\n  - name: vsc0\n    mode: shaped\n    uplink: %s\n' "$1"
  printf 'rules:\n  - name: bulk\n    lane: background\n    dst: 10.99.0.2\n    dport: 5202\n'
}

# check_disk DIR: the package, the steps, the policies and leakcheck.
check_disk() {
  local d=$1/check
  mkdir -p "$d"
  make --no-print-directory deb OUT="$1/out" >"$1/deb.log" 2>&1 || { tail -20 "$1/deb.log" >&2; return 1; }
  cp "$1"/out/lanes_*.deb "$d/"
  # A newer build of the same tree (Debian revision 2) to upgrade to.
  make --no-print-directory deb OUT="$1/out2" DEBREVISION=2 >>"$1/deb.log" 2>&1 || { tail -20 "$1/deb.log" >&2; return 1; }
  mkdir -p "$d/upgrade" && cp "$1"/out2/lanes_*.deb "$d/upgrade/"
  CGO_ENABLED=0 ./scripts/go build -o "$d/leakcheck" ./internal/leaks/leakcheck
  install -m755 scripts/system-vm-guest.sh "$d/run.sh"
  policy 20mbit > "$d/policy-20.yaml"; policy 10mbit > "$d/policy-10.yaml"
  { policy 10mbit; printf 'realtime:\n  enabled: true\n  pm_latency_us: 0\n'; } > "$d/policy-rt.yaml"
  mkfs.ext4 -q -d "$d" "$1/check.img" 512M
}

mkdir -p "$cache"
fetch_kernel
[ -f "$base/rootfs.img" ] || build_base
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check_disk "$work"
log=${LANES_VM_LOG:-$cache/console.log}
echo "system-check: booting Debian $suite, kernel $kver (qemu, TCG); console in $log" >&2
timeout 1800 qemu-system-x86_64 -m 2048 -smp 2 -nographic -no-reboot -nic none \
  -kernel "$base/vmlinuz" -initrd "$base/initrd.img" \
  -append "root=/dev/vda rw console=ttyS0 quiet systemd.show_status=0 panic=-1" \
  -drive file="$base/rootfs.img",format=raw,if=virtio,snapshot=on \
  -drive file="$work/check.img",format=raw,if=virtio,readonly=on \
  -device virtio-rng-pci >"$log" 2>&1 || true
tr -d '\r' < "$log" | sed -n '/== system /,/^== done/ { s/^.*== system /== system /; p }'
grep -q '^== done: 0 failed' <(tr -d '\r' < "$log") || { echo "system-check: failed (console in $log)" >&2; exit 1; }
