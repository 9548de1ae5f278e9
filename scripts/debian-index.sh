# scripts/debian-index.sh: resolve Debian packages from the archive's signed
# index, sourced by scripts/kernel-vm.sh and scripts/system-vm.sh (and runnable:
# `scripts/debian-index.sh ARCH PACKAGE SOURCE...` prints what it resolves).
#
# Debian's archive drops a version when the next one lands, so a package
# pinned by version and sha256 fails with 404 within weeks. Instead:
#
#   MIRROR/dists/SUITE/InRelease ──gpgv, debian-archive-keyring──▶ Release
#   Release: sha256 of main/binary-ARCH/Packages.xz ──sha256sum -c──▶ Packages
#   Packages: PACKAGE's Version, Filename, SHA256 ──▶ the .deb, checked
#
# so every byte is tied to the archive's signature, and the version used is
# whatever the suite holds today (printed, and recorded by the callers).
# Indexes are cached under $DEB_INDEX_CACHE by their sha256 (an unchanged
# suite costs only its InRelease, ~150 KB).
# A SOURCE is MIRROR|SUITE, e.g. http://deb.debian.org/debian|bookworm.

DEB_INDEX_CACHE=${DEB_INDEX_CACHE:-${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}/index}
DEB_KEYRING=${DEB_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

# deb_index SOURCE ARCH: the path of the suite's verified, uncompressed
# main Packages file for ARCH.
deb_index() {
  local mirror=${1%|*} suite=${1#*|} arch=$2 dir tmp sum
  dir=$DEB_INDEX_CACHE/$(printf %s "$mirror/$suite" | tr -c 'A-Za-z0-9.\n-' _)
  mkdir -p "$dir"
  tmp=$(mktemp -d)
  curl -fsSL --retry 3 -o "$tmp/InRelease" "$mirror/dists/$suite/InRelease" || { rm -rf "$tmp"; return 1; }
  if ! gpgv --keyring "$DEB_KEYRING" --output "$tmp/Release" "$tmp/InRelease" 2>"$tmp/gpgv"; then
    echo "debian-index: $mirror $suite: InRelease signature not valid:" >&2; cat "$tmp/gpgv" >&2
    rm -rf "$tmp"; return 1
  fi
  mv "$tmp/Release" "$dir/Release"
  sum=$(awk -v f="main/binary-$arch/Packages.xz" '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3 == f {print $1}' "$dir/Release")
  [ -n "$sum" ] || { echo "debian-index: $suite has no main/binary-$arch/Packages.xz" >&2; rm -rf "$tmp"; return 1; }
  if [ ! -s "$dir/$sum.Packages" ]; then
    curl -fsSL --retry 3 -o "$tmp/Packages.xz" "$mirror/dists/$suite/main/binary-$arch/Packages.xz" &&
      echo "$sum  $tmp/Packages.xz" | sha256sum -c --quiet - &&
      xz -dc "$tmp/Packages.xz" >"$dir/$sum.Packages.part" && mv "$dir/$sum.Packages.part" "$dir/$sum.Packages" ||
      { echo "debian-index: $suite main/binary-$arch/Packages.xz: download or sha256 failed" >&2; rm -rf "$tmp"; return 1; }
  fi
  rm -rf "$tmp"
  echo "$dir/$sum.Packages"
}

# deb_resolve ARCH PACKAGE SOURCE...: "VERSION MIRROR/FILENAME SHA256 SOURCE"
# of the highest version of PACKAGE in the sources' indexes (a suite and its
# updates or security suite), or an error naming the package.
deb_resolve() {
  local arch=$1 pkg=$2 src idx line best= bestv=
  shift 2
  for src in "$@"; do
    idx=$(deb_index "$src" "$arch") || return 1
    while IFS=$'\t' read -r v f s; do
      [ -n "$v" ] || continue
      if [ -z "$bestv" ] || dpkg --compare-versions "$v" gt "$bestv"; then
        bestv=$v best="$v ${src%|*}/$f $s ${src#*|}"
      fi
    done < <(awk -v p="$pkg" 'BEGIN{RS=""; FS="\n"} {
        n=v=f=s=""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Package: /) n = substr($i, 10)
          else if ($i ~ /^Version: /) v = substr($i, 10)
          else if ($i ~ /^Filename: /) f = substr($i, 11)
          else if ($i ~ /^SHA256: /) s = substr($i, 9)
        }
        if (n == p) printf "%s\t%s\t%s\n", v, f, s
      }' "$idx")
  done
  [ -n "$best" ] || { echo "debian-index: $pkg ($arch) is in none of: $*" >&2; return 1; }
  echo "$best"
}

# deb_depends_on ARCH PACKAGE PREFIX SOURCE...: the first package that the
# highest version of PACKAGE depends on whose name starts with PREFIX (a
# metapackage's kernel).
deb_depends_on() {
  local arch=$1 pkg=$2 prefix=$3 src idx best
  shift 3
  best=$(deb_resolve "$arch" "$pkg" "$@") || return 1
  for src in "$@"; do
    [ "${src#*|}" = "${best##* }" ] || continue
    idx=$(deb_index "$src" "$arch") || return 1
    awk -v p="$pkg" -v pre="$prefix" 'BEGIN{RS=""; FS="\n"} {
        n=d=""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Package: /) n = substr($i, 10)
          else if ($i ~ /^Depends: /) d = substr($i, 10)
        }
        if (n != p) next
        k = split(d, dep, /, */)
        for (j = 1; j <= k; j++) { split(dep[j], w, / /); if (index(w[1], pre) == 1) { print w[1]; exit } }
      }' "$idx" | head -1 | grep . && return 0
  done
  echo "debian-index: $pkg ($arch) depends on no $prefix* in: $*" >&2
  return 1
}

# deb_fetch "VERSION URL SHA256 SUITE" DEST: download a resolved package
# (kept if DEST already has those bytes) and check its sha256.
deb_fetch() {
  local url sum
  set -- $1 "$2"
  url=$2 sum=$3
  [ -f "$5" ] && echo "$sum  $5" | sha256sum -c --quiet - 2>/dev/null && return 0
  curl -fsSL --retry 3 -o "$5.part" "$url" && echo "$sum  $5.part" | sha256sum -c --quiet - && mv "$5.part" "$5"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# -ge 3 ] || { echo "usage: $0 ARCH PACKAGE MIRROR|SUITE..." >&2; exit 2; }
  deb_resolve "$@"
fi
