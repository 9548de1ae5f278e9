#!/usr/bin/env bash
# scripts/core-btf.sh: regenerate the kernel BTF that internal/bpf/coretest
# relocates the lanes BPF objects against, after an object starts to use a
# kernel type or field it did not use before (`make generate` first).
#
#   testdata/linux-5.10.*-debian.*   Debian 11 (bullseye) linux-image-5.10.0-N-cloud-amd64,
#                                    fetched with curl from the Debian archive
#                                    (InRelease checked with gpgv against
#                                    debian-archive-keyring, then Packages.xz
#                                    and the .deb by their sha256)
#   testdata/linux-6.1.*-debian.*    Debian 12's linux-image-6.1.0-N-cloud-amd64
#                                    (apt-get download from the machine's sources)
#   testdata/linux-*-running.*       this machine's /sys/kernel/btf/vmlinux
#
# For each kernel: NAME.btf is `bpftool gen min_core_btf` output (only the
# types the objects use, a few KB) and NAME.features lists which of the
# kernel features in testdata/features.txt its full BTF has. Provenance
# (package, version, sha256) goes to testdata/README.md's table by hand.
# The 5.15 model (testdata/models/*.c) is edited by hand; see core_test.go.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bpf=$here/internal/bpf
out=$bpf/coretest/testdata
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
objs=("$bpf"/sockops/sockops_bpfel.o "$bpf"/tcpevents/tcpevents_bpfel.o "$bpf"/capcc/capcc_bpfel.o
      "$bpf"/ledbat/ledbat_bpfel.o "$bpf"/ledbat/step_bpfel.o "$bpf"/classifier/classifier_bpfel.o
      "$bpf"/tcpiter/tcpiter_bpfel.o)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# vmlinux_of DEB DIR: the vmlinux inside DEB's bzImage, written to DIR/vmlinux.
vmlinux_of() {
	local deb=$1 dir=$2
	dpkg-deb -x "$deb" "$dir/x"
	# The bzImage's payload (setup header fields payload_offset/length) is
	# the compressed vmlinux; Debian compresses it with lz4 (legacy frame).
	python3 - "$(ls "$dir"/x/boot/vmlinuz-*)" "$dir/payload" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
setup = (d[0x1f1] or 4) + 1
off, n = struct.unpack_from('<II', d, 0x248)
open(sys.argv[2], 'wb').write(d[setup * 512 + off:setup * 512 + off + n])
PY
	case $(head -c 4 "$dir/payload" | od -An -tx1 | tr -d ' ') in
	02214c18) lz4 -dc "$dir/payload" >"$dir/vmlinux" 2>/dev/null || true ;;
	28b52ffd) zstd -dc "$dir/payload" >"$dir/vmlinux" ;;
	fd377a58) xz -dc "$dir/payload" >"$dir/vmlinux" ;;
	*) echo "unknown bzImage compression" >&2; exit 1 ;;
	esac
	grep -q '^CONFIG_DEBUG_INFO_BTF=y' "$dir"/x/boot/config-* || { echo "$deb: no BTF" >&2; exit 1; }
}

# features VMLINUX: the names in features.txt whose type, function or enum
# value VMLINUX's BTF has.
features() {
	bpftool btf dump file "$1" >"$tmp/dump"
	grep -v '^#' "$out/features.txt" | while read -r name kind rest; do
		[ -n "$name" ] || continue
		case $kind in
		func) pat="FUNC '$name' " ;;
		struct) pat="STRUCT '$name' " ;;
		enumval) pat="	'$name' val=" ;;
		*) echo "features.txt: unknown kind $kind" >&2; exit 1 ;;
		esac
		if grep -qF "$pat" "$tmp/dump"; then echo "$name"; fi
	done
}

# emit VMLINUX NAME: testdata/NAME.btf and testdata/NAME.features.
emit() {
	bpftool gen min_core_btf "$1" "$out/$2.btf" "${objs[@]}"
	features "$1" >"$out/$2.features"
}

# Debian 11's newest 5.10 cloud kernel, from the archive (bullseye is not
# in the machine's apt sources and is not added to them).
d=$tmp/510 && mkdir -p "$d"
curl -fsS -o "$d/InRelease" "$mirror/dists/bullseye/InRelease"
gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$d/InRelease" 2>/dev/null
curl -fsS -o "$d/Packages.xz" "$mirror/dists/bullseye/main/binary-amd64/Packages.xz"
want=$(awk '$3 == "main/binary-amd64/Packages.xz" && length($1) == 64 {print $1}' "$d/InRelease")
[ "$(sha256sum <"$d/Packages.xz" | cut -d' ' -f1)" = "$want" ] || { echo "Packages.xz: sha256 mismatch" >&2; exit 1; }
xz -dc "$d/Packages.xz" | awk -v RS= -v ORS='\n\n' '/^Package: linux-image-5\.10\.0-[0-9]+-cloud-amd64\n/' >"$d/stanzas"
pkg510=$(grep '^Package:' "$d/stanzas" | awk '{print $2}' | sort -V | tail -1)
stanza=$(awk -v RS= -v p="$pkg510" 'index($0, "Package: " p "\n") == 1' "$d/stanzas")
file=$(sed -n 's/^Filename: //p' <<<"$stanza")
sum=$(sed -n 's/^SHA256: //p' <<<"$stanza")
curl -fsS -o "$d/k.deb" "$mirror/$file"
[ "$(sha256sum <"$d/k.deb" | cut -d' ' -f1)" = "$sum" ] || { echo "$file: sha256 mismatch" >&2; exit 1; }
vmlinux_of "$d/k.deb" "$d"
ver=$(dpkg-deb -f "$d/k.deb" Version | cut -d- -f1)
rm -f "$out"/linux-5.10.*-debian.*
emit "$d/vmlinux" "linux-$ver-debian"
echo "$pkg510 $(dpkg-deb -f "$d/k.deb" Version) sha256 $sum"

# Debian 12's newest 6.1 cloud kernel, through the machine's apt sources.
d=$tmp/61 && mkdir -p "$d"
pkg61=${1:-$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64$' | awk '{print $1}' | sort -V | tail -1)}
(cd "$d" && apt-get download "$pkg61" >/dev/null)
vmlinux_of "$d"/*.deb "$d"
ver=$(dpkg-deb -f "$d"/*.deb Version | cut -d- -f1)
rm -f "$out"/linux-6.1.*-debian.*
emit "$d/vmlinux" "linux-$ver-debian"
echo "$pkg61 $(dpkg-deb -f "$d"/*.deb Version) sha256 $(sha256sum "$d"/*.deb | cut -d' ' -f1)"

rm -f "$out"/linux-*-running.*
emit /sys/kernel/btf/vmlinux "linux-$(uname -r | cut -d- -f1)-running"
ls -l "$out"
