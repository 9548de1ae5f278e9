#!/usr/bin/env bash
# scripts/bpf-other-distro.sh [SUITE]: rebuild every BPF object with `make
# generate` inside a Debian SUITE chroot (default trixie) and compare its
# bytes with this tree's committed objects. Root; debootstrap; network to
# deb.debian.org. The chroot is cached under $CACHE (default
# /var/cache/lanes-bpf-distro) and reused; the host's Go toolchain and module
# cache are bind-mounted read-only, so the only thing that differs from the
# host build is the distribution (its clang-19 package, libc, everything).
#
#   host tree ──copy──▶ $CACHE/SUITE/src ── make generate (chroot) ──▶ *.o
#   compare: sha256 of every *.o and *_bpfel.go, host vs chroot
set -euo pipefail
suite=${1:-trixie}
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${CACHE:-/var/cache/lanes-bpf-distro}
root=$cache/$suite
goroot=$(cd "$here" && ./scripts/go env GOROOT)
modcache=$(cd "$here" && ./scripts/go env GOMODCACHE)
[ "$(id -u)" = 0 ] || { echo "bpf-other-distro: needs root (debootstrap, chroot)" >&2; exit 1; }

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
  mkdir -p "$cache/debs"
  debootstrap --variant=minbase --cache-dir="$cache/debs" --include=ca-certificates,make \
    "$suite" "$root" http://deb.debian.org/debian >"$cache/debootstrap-$suite.log"
fi

mounts=()
cleanup() { for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" || true; done; }
trap cleanup EXIT
bind() { # bind SRC DST [ro]
  mkdir -p "$2"; mount --bind "$1" "$2"; mounts+=("$2")
  [ "${3:-}" = ro ] && mount -o remount,bind,ro "$2"
  return 0
}
mount -t proc proc "$root/proc"; mounts+=("$root/proc")
bind "$goroot" "$root/opt/go" ro
bind "$modcache" "$root/opt/gomod" ro
cp /etc/resolv.conf "$root/etc/resolv.conf"

rm -rf "$root/src"; mkdir -p "$root/src"
(cd "$here" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$root/src")
chroot "$root" env -i PATH=/opt/go/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  GOMODCACHE=/opt/gomod GOCACHE=/tmp/gocache GOFLAGS=-mod=readonly GOPROXY=off GOTOOLCHAIN=local \
  sh -c 'cd /src && . /etc/os-release && echo "chroot: $PRETTY_NAME" &&
    ./scripts/deps.sh generate && dpkg-query -W clang-19 llvm-19 && make generate'

sums() { (cd "$1" && find internal -name '*.o' -o -name '*_bpfel.go' | sort | xargs sha256sum); }
sums "$here" >"$cache/host.sha256"
sums "$root/src" >"$cache/$suite.sha256"
n=$(wc -l <"$cache/host.sha256")
if diff -u "$cache/host.sha256" "$cache/$suite.sha256"; then
  echo "bpf-other-distro: $n generated files byte-identical on $suite and this host"
else
  echo "bpf-other-distro: generated files differ on $suite (above)" >&2
  exit 1
fi
