#!/usr/bin/env bash
# internal/bpf/include/update.sh: refresh the vendored BPF headers from
# Debian's libbpf at the pinned version below, checked against its sha256.
#
#   bpf/   bpf_helpers.h, bpf_helper_defs.h, bpf_tracing.h, bpf_core_read.h,
#          bpf_endian.h: the files libbpf-dev installs in /usr/include/bpf
#          (LGPL-2.1 OR BSD-2-Clause; lanes takes them under BSD-2-Clause).
#   linux/ bpf.h, bpf_common.h, pkt_cls.h, pkt_sched.h: the kernel's UAPI
#          headers that libbpf carries in include/uapi (GPL-2.0 WITH
#          Linux-syscall-note), taken from the same Debian source package.
#
# linux/types.h and lanes_kernel.h are lanes' own, not vendored. The BPF
# objects are built with -nostdinc against this folder alone (gen.go lines),
# so they do not depend on the build machine's headers.
#
# To move to another libbpf: set LIBBPF_VERSION, DEB and both sha256 sums
# (sha256sum of the downloaded files, checked against the archive's Packages
# and Sources indexes), run this script, `make generate`, commit the headers
# and the objects together.
set -euo pipefail
LIBBPF_VERSION=1.1.2
DEB=libbpf-dev_1.1.2-0+deb12u1_amd64.deb
DEB_SHA256=0100eea9fdf5cc925b9073b47684bba85b531657610e634be8bf90264a32b552
ORIG=libbpf_${LIBBPF_VERSION}.orig.tar.gz
ORIG_SHA256=b50ab60637fb713db78aa98e6ca911ddf13c0799d498a1f6ec03ebffc7dca588
POOL=${DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/main/libb/libbpf

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fetch() { # fetch FILE SHA256: download FILE from the pool and check it
  curl -fsSL --retry 3 -o "$tmp/$1" "$POOL/$1"
  echo "$2  $tmp/$1" | sha256sum -c --quiet -
}
fetch "$DEB" "$DEB_SHA256"
fetch "$ORIG" "$ORIG_SHA256"

dpkg-deb -x "$tmp/$DEB" "$tmp/deb"
tar -xzf "$tmp/$ORIG" -C "$tmp"
mkdir -p "$here/bpf" "$here/linux"
for h in bpf_helpers.h bpf_helper_defs.h bpf_tracing.h bpf_core_read.h bpf_endian.h; do
  install -m644 "$tmp/deb/usr/include/bpf/$h" "$here/bpf/$h"
done
for h in bpf.h bpf_common.h pkt_cls.h pkt_sched.h; do
  install -m644 "$tmp/libbpf-$LIBBPF_VERSION/include/uapi/linux/$h" "$here/linux/$h"
done
echo "libbpf $LIBBPF_VERSION ($DEB) headers in $here/bpf and $here/linux"
