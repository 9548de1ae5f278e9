#!/usr/bin/env bash
# scripts/core-btf.sh: regenerate the kernel BTF that internal/bpf/coretest
# relocates the lanes BPF objects against, after an object starts to use a
# kernel type or field it did not use before (`make generate` first).
#
#   testdata/linux-6.1.*-debian.btf  from Debian 12's linux-image cloud kernel
#                                    (downloaded with apt-get, vmlinux taken
#                                    out of its bzImage)
#   testdata/linux-*-running.btf     from this machine's /sys/kernel/btf/vmlinux
#
# Both are `bpftool gen min_core_btf` output: only the types the objects
# use, a few KB. The 5.10/5.15 models (testdata/models/*.c) are edited by
# hand; see core_test.go.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bpf=$here/internal/bpf
out=$bpf/coretest/testdata
pkg=${1:-$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64$' | awk '{print $1}' | sort -V | tail -1)}
objs=("$bpf"/sockops/sockops_bpfel.o "$bpf"/tcpevents/tcpevents_bpfel.o "$bpf"/capcc/capcc_bpfel.o
      "$bpf"/ledbat/ledbat_bpfel.o "$bpf"/classifier/classifier_bpfel.o)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && apt-get download "$pkg" >/dev/null)
dpkg-deb -x "$tmp"/*.deb "$tmp/x"
img=$(ls "$tmp"/x/boot/vmlinuz-*)
ver=$(dpkg-deb -f "$tmp"/*.deb Version | cut -d- -f1)
# The bzImage's payload (setup header fields payload_offset/length) is the
# compressed vmlinux; Debian 6.1 compresses it with lz4 (legacy frame).
python3 - "$img" "$tmp/payload" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
setup = (d[0x1f1] or 4) + 1
off, n = struct.unpack_from('<II', d, 0x248)
open(sys.argv[2], 'wb').write(d[setup * 512 + off:setup * 512 + off + n])
PY
case $(head -c 4 "$tmp/payload" | od -An -tx1 | tr -d ' ') in
  02214c18) lz4 -dc "$tmp/payload" >"$tmp/vmlinux" 2>/dev/null || true ;;
  28b52ffd) zstd -dc "$tmp/payload" >"$tmp/vmlinux" ;;
  fd377a58) xz -dc "$tmp/payload" >"$tmp/vmlinux" ;;
  *) echo "unknown bzImage compression" >&2; exit 1 ;;
esac
rm -f "$out"/linux-6.1.*-debian.btf "$out"/linux-*-running.btf
bpftool gen min_core_btf "$tmp/vmlinux" "$out/linux-$ver-debian.btf" "${objs[@]}"
run=$(uname -r | cut -d- -f1)
bpftool gen min_core_btf /sys/kernel/btf/vmlinux "$out/linux-$run-running.btf" "${objs[@]}"
ls -l "$out"
