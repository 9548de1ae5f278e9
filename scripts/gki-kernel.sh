#!/usr/bin/env bash
# scripts/gki-kernel.sh: cross-build the GKI-configured arm64 kernel that
# `KERNEL=gki-6.12 ARCH=arm64 scripts/kernel-vm.sh` boots: Debian's
# linux-source-6.12 (pinned by sha256) configured with GKI android16-6.12's
# networking, BPF, cgroup and scheduling options (scripts/gki/
# android16-6.12.fragment) on a minimal qemu -M virt base (scripts/gki/
# virt-base.fragment). Image only: modules are enabled, as in GKI (6.12
# registers no struct_ops congestion control without them), but none is
# built; what GKI builds as a module and lanes needs is built in.
#
# The result (Image, config, build-time) is cached in
# $LANES_CACHE/kernels/gki-6.12-<key>, key = sha256 of the source package and
# of both fragments; a second run with the same inputs builds nothing. Prints
# the cache directory on stdout. The compile runs under nice -n 19.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
# Debian 12's security archive (bookworm-security carries 6.12 for
# bookworm): the pinned source package, or, once the archive has replaced
# it, the suite's current one (below).
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
deb_url=$security/pool/updates/main/l/linux-6.12/linux-source-6.12_6.12.117-1~deb12u1_all.deb
deb_sha=e849faf31ca3555757f3a8877cb01af92122f744f75d1f3102734651c4e14703
fragments=(scripts/gki/virt-base.fragment scripts/gki/android16-6.12.fragment)
cachetop=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}
# set_key: the cache key and folder from the source's and fragments' sha256.
set_key() {
  key=$( { echo "$deb_sha"; sha256sum "${fragments[@]}" | cut -d' ' -f1; } | sha256sum | cut -c1-16)
  out=$cachetop/kernels/gki-6.12-$key
}
cached() {
  [ -f "$out/Image" ] && [ -f "$out/config" ] || return 1
  echo "gki-kernel: cached ($out, built in $(cat "$out/build-seconds" 2>/dev/null || echo ?) s)" >&2
  echo "$out"
}
set_key
cached && exit 0
./scripts/deps.sh gki >&2
src=$cachetop/src; mkdir -p "$src"
deb=$src/$(basename "$deb_url")
if [ ! -f "$deb" ] || ! echo "$deb_sha  $deb" | sha256sum -c --quiet 2>/dev/null; then
  if ! curl -sSfL -o "$deb.part" "$deb_url"; then
    # The archive drops a version when the next one lands: the suite's
    # current linux-source-6.12 from its signed index (gpgv-verified,
    # scripts/debian-index.sh); the cache key follows its sha256.
    . "$here/scripts/debian-index.sh"
    read -r version deb_url deb_sha _ <<<"$(deb_resolve amd64 linux-source-6.12 "$security|bookworm-security")"
    echo "gki-kernel: the pinned source is gone from the archive; using $version (sha256 $deb_sha)" >&2
    set_key
    cached && exit 0
    deb=$src/$(basename "$deb_url")
    curl -sSfL -o "$deb.part" "$deb_url"
  fi
  echo "$deb_sha  $deb.part" | sha256sum -c --quiet
  mv "$deb.part" "$deb"
fi
mkdir -p "$out"
# check_config CONFIG: every option the fragments set took its value (an
# option whose dependencies the base lacks is silently dropped otherwise).
check_config() {
  local f line sym bad=0
  for f in "${fragments[@]}"; do
    while IFS= read -r line; do
      case "$line" in
        CONFIG_*=*) sym=${line%%=*}; grep -qxF "$line" "$1" || { echo "gki-kernel: $line did not take ($(grep -E "^$sym=|^# $sym is not set" "$1" || echo unset))" >&2; bad=1; } ;;
        "# CONFIG_"*" is not set") sym=${line#\# }; sym=${sym%% *}; ! grep -q "^$sym=" "$1" || { echo "gki-kernel: $line did not take" >&2; bad=1; } ;;
      esac
    done < "$f"
  done
  return $bad
}
# builtin CONFIG: what scripts/kernel-vm.sh insmods on Debian's kernels
# (and BTF, which CO-RE and struct_ops need) is built in here: no modules.
builtin() {
  local s bad=0
  for s in NET_SCH_HTB NET_SCH_TBF NET_SCH_INGRESS NET_CLS_BPF NET_ACT_BPF NET_SCH_FQ NET_SCH_PRIO \
    NET_SCH_NETEM NET_SCH_FQ_CODEL VETH TUN INET_DIAG INET_TCP_DIAG IFB NET_ACT_MIRRED NET_CLS_U32 \
    LLC STP BRIDGE DEBUG_INFO_BTF CGROUP_BPF BPF_JIT; do
    grep -qx "CONFIG_$s=y" "$1" || { echo "gki-kernel: CONFIG_$s is not built in" >&2; bad=1; }
  done
  return $bad
}
t0=$(date +%s)
build=$cachetop/build/gki-6.12-$key
# One build per key at a time: a second run waits for the first (and then
# finds its result in the cache).
mkdir -p "$cachetop/build"
exec 9>"$build.lock"
flock 9
cached && exit 0
if [ ! -f "$build/.unpacked" ]; then
  rm -rf "$build"; mkdir -p "$build"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -O --wildcards '*/linux-source-6.12.tar.xz' | xz -dc |
    tar -x -C "$build" --strip-components=1
  touch "$build/.unpacked"
fi
kmake=(make -C "$build" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- -j"$(nproc)")
"${kmake[@]}" -s alldefconfig >&2
(cd "$build" && ARCH=arm64 ./scripts/kconfig/merge_config.sh -m -O . .config "${fragments[@]/#/$here/}") >&2
"${kmake[@]}" -s olddefconfig >&2
check_config "$build/.config"
builtin "$build/.config"
nice -n 19 "${kmake[@]}" Image >&2
cp "$build/arch/arm64/boot/Image" "$out/Image"
cp "$build/.config" "$out/config"
echo $(( $(date +%s) - t0 )) > "$out/build-seconds"
rm -rf "$build" # ~2 GB of objects; the cache holds the result
echo "gki-kernel: built $out in $(cat "$out/build-seconds") s" >&2
echo "$out"
