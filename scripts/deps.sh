#!/usr/bin/env bash
# scripts/deps.sh [build|cross|test|generate|demo|deb|vm|vm-arm64|gki|system]: install the Debian packages a
# make target needs, only those missing, so repeated runs cost nothing. A fresh Debian runs
# unattended-upgrades at boot: apt's locks are waited for (up to 10 minutes), not failed on.
set -euo pipefail
want=(iproute2 procps util-linux kmod)
case "${1:-test}" in
  build) want+=(gcc libc6-dev) ;; # lanes-rtd (rtd/, C)
  cross) want+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;; # lanes-rtd for arm64
  # generate: the pinned clang (internal/bpf/gencheck.PinnedClang) and its
  # llvm-strip; the headers are vendored (internal/bpf/include/update.sh).
  generate) want+=(clang-19 llvm-19 bpftool) ;;
  # test: chromium drives the dashboard's browser test (promtool: below).
  # clang-19, llvm-19: internal/bpf/gencheck rebuilds the BPF objects and fails on drift.
  # clang, pkg-config: the C client's header built with gcc and clang, against its pkg-config file;
  # python3-venv, python3-setuptools, python3-wheel: the Python client installed into a virtual
  # environment, offline; cargo: the Rust client built and its example run (Debian's rustc 1.63, the
  # crate's rust-version).
  # gcc: cgo for go test -race; iperf3: the unresponsive UDP upload; dpkg-dev, file, binutils: make deb
  # (dist/dist_test.go), lintian: its check of the package; libclang-rt-dev: lanes-rtd's fuzz target
  # and sanitizer builds; ngtcp2-client, ngtcp2-server: a second QUIC implementation beside quic-go
  # (internal/daemon's TestBackgroundNgtcp2*; the server's example service is stopped below).
  test) want+=(rt-tests ethtool chromium gcc libc6-dev iperf3 clang-19 llvm-19 clang pkg-config python3 python3-venv python3-setuptools python3-wheel cargo dpkg-dev file binutils lintian libclang-rt-dev ngtcp2-client ngtcp2-server) ;;
  deb) want+=(dpkg-dev file binutils) ;; # dpkg-shlibdeps, strip
  demo) want+=(rt-tests ethtool) ;;
  # vm: scripts/kernel-vm.sh boots an older kernel in qemu (TCG).
  # gpgv, debian-archive-keyring: the kernel's packages are resolved from the
  # archive's signed index (scripts/debian-index.sh).
  vm) want+=(qemu-system-x86 busybox-static cpio xz-utils curl gcc libc6-dev gpgv debian-archive-keyring) ;; # gcc: a static lanes-rtd
  # vm-arm64: the same for Debian's arm64 kernel (its user space is fetched).
  vm-arm64) want+=(qemu-system-arm cpio xz-utils curl gcc-aarch64-linux-gnu libc6-dev-arm64-cross gpgv debian-archive-keyring) ;;
  # system: scripts/system-vm.sh debootstraps a Debian system and boots it.
  # gki: scripts/gki-kernel.sh cross-builds an arm64 kernel (pahole: BTF).
  gki) want+=(gcc-aarch64-linux-gnu make bc flex bison dwarves libelf-dev libssl-dev xz-utils curl gpgv debian-archive-keyring) ;;
  system) want+=(debootstrap qemu-system-x86 e2fsprogs curl xz-utils gpgv debian-archive-keyring) ;;
esac
# promtool checks /metrics in make test. Debian ships it only inside the
# prometheus package, whose installation would also set up a Prometheus
# server: take promtool out of the package instead of installing it.
tools=/usr/local/lib/lanes-tools
get_promtool() {
  command -v promtool >/dev/null || [ -x "$tools/promtool" ] && return 0
  if [ "$(id -u)" != 0 ]; then echo "deps: need root to fetch promtool" >&2; return 1; fi
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }; }) &&
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" && install -Dm755 "$tmp/x/usr/bin/promtool" "$tools/promtool"
  local rc=$?; rm -rf "$tmp"; return $rc
}
[ "${1:-test}" = test ] && { get_promtool || echo "deps: promtool unavailable: metrics are checked with promlint only" >&2; }

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "deps: need root to install: ${missing[*]}" >&2; exit 1; fi
echo "deps: installing ${missing[*]}" >&2
# apt-get update takes /var/lib/apt/lists/lock, which DPkg::Lock::Timeout
# does not cover: it is retried while that lock is what fails it; install
# waits for dpkg's locks itself.
lock_wait=600
apt_update() {
  local waited=0 err; err=$(mktemp)
  until apt-get -o DPkg::Lock::Timeout=$lock_wait update -qq 2>"$err"; do
    grep -q -i 'lock' "$err" || { cat "$err" >&2; rm -f "$err"; return 1; }
    if [ $waited -ge $lock_wait ]; then
      cat "$err" >&2; rm -f "$err"
      echo "deps: apt still busy after ${lock_wait}s; run the make target again when it is done" >&2; return 1
    fi
    [ $waited = 0 ] && echo "deps: apt is busy (unattended-upgrades on a fresh system?): waiting up to ${lock_wait}s for /var/lib/apt/lists/lock" >&2
    sleep 5; waited=$((waited + 5))
  done
  rm -f "$err"
}
apt_update
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$lock_wait install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
  { echo "deps: apt-get install ${missing[*]} failed (a lock held over ${lock_wait}s is named above)" >&2; exit 1; }
# ngtcp2-server ships an example service (ngtcp2d, localhost:7777) that systemd starts at
# install: the tests run their own server in a namespace, so it is stopped and disabled.
if [[ " ${missing[*]} " == *" ngtcp2-server "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now ngtcp2d.service >/dev/null 2>&1 || true
fi

