#!/usr/bin/env bash
# scripts/deps.sh [build|cross|test|generate|demo|vm|vm-arm64|system]: install the Debian packages a make
# target needs, only those missing, so repeated runs cost nothing.
set -euo pipefail
want=(iproute2 procps util-linux kmod)
case "${1:-test}" in
  build) want+=(gcc libc6-dev) ;; # lanes-rtd (rtd/, C)
  cross) want+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;; # lanes-rtd for arm64
  generate) want+=(clang llvm libbpf-dev linux-libc-dev bpftool) ;;
  # test: chromium drives the dashboard's browser test (promtool: below).
  test) want+=(rt-tests ethtool chromium gcc libc6-dev iperf3 clang libclang-rt-dev) ;; # gcc: cgo for go test -race; iperf3: the unresponsive UDP upload; clang, libclang-rt-dev: lanes-rtd's fuzz target and sanitizer builds
  demo) want+=(rt-tests ethtool) ;;
  # vm: scripts/kernel-vm.sh boots an older kernel in qemu (TCG).
  vm) want+=(qemu-system-x86 busybox-static cpio xz-utils curl gcc libc6-dev) ;; # gcc: a static lanes-rtd
  # vm-arm64: the same for Debian's arm64 kernel (its user space is fetched).
  vm-arm64) want+=(qemu-system-arm cpio xz-utils curl gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
  # system: scripts/system-vm.sh debootstraps a Debian system and boots it.
  system) want+=(debootstrap qemu-system-x86 e2fsprogs curl) ;;
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
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

