#!/usr/bin/env bash
# scripts/deb-depends.sh ROOT: the Depends: field of the package staged in
# ROOT (make deb), computed by dpkg-shlibdeps from its dynamically linked
# ELF files (lanes-rtd links glibc; the Go binary is static and needs
# nothing). dpkg-shlibdeps wants a source tree's debian/control: it runs in
# a scratch one naming the package.
set -euo pipefail
root=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debian"
printf 'Source: lanes\n\nPackage: lanes\nArchitecture: any\n' > "$tmp/debian/control"
mapfile -t elfs < <(find "$root" -path "$root/DEBIAN" -prune -o -type f -perm -u+x -print |
  while read -r f; do file -b "$f" | grep -q 'dynamically linked' && echo "$f"; done)
[ ${#elfs[@]} -gt 0 ] || { echo "deb-depends: no dynamically linked file in $root" >&2; exit 1; }
(cd "$tmp" && dpkg-shlibdeps -O "${elfs[@]}") | sed -n 's/^shlibs:Depends=//p'
