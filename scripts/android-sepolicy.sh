#!/bin/sh
# android-sepolicy.sh: compile the OEM kit's SELinux fragment
# (dist/android/lanes.te) with Android's public platform policy
# (system/sepolicy's public/ and private/), as Android's build does (m4 over
# the files in policyConfOrder, then checkpolicy), with Debian's
# checkpolicy and m4; checkpolicy checks every neverallow. Prints each
# violation and their count; fails on any.
#
#   SEPOLICY_SRC=<git dir or URL> scripts/android-sepolicy.sh [FRAGMENT.te]
#
# FRAGMENT: the kit's lanes.te (the default, with its file_contexts
# checked) or another fragment, such as dist/android/vendor-route.te.
#
# The source is pinned by commit (Android 15's 24Q3 release branch, the
# last AOSP commit of LineageOS's mirror lineage-22.0) and cached in
# $LANES_CACHE/sepolicy-<commit>; without SEPOLICY_SRC and without the
# cache it says so and stops (nothing is downloaded unless asked).
set -eu
COMMIT=ad1c4255c49d57fe885894a8b690c0dfd542100b
HERE=$(cd "$(dirname "$0")/.." && pwd)
TE=$(realpath "${1:-$HERE/dist/android/lanes.te}")
CACHE=${LANES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}/sepolicy-$COMMIT
for t in m4 checkpolicy python3; do
	command -v $t >/dev/null || { echo "android-sepolicy: $t missing (apt-get install checkpolicy m4)"; exit 2; }
done
if [ ! -d "$CACHE/public" ]; then
	if [ -z "${SEPOLICY_SRC:-}" ]; then
		echo "android-sepolicy: no cached system/sepolicy at $CACHE; give SEPOLICY_SRC, a git dir or URL holding commit $COMMIT" \
			"(AOSP's https://android.googlesource.com/platform/system/sepolicy, or a mirror of it)"
		exit 2
	fi
	mkdir -p "$CACHE.tmp"
	case "$SEPOLICY_SRC" in
	http*) git clone -q --no-checkout "$SEPOLICY_SRC" "$CACHE.git"; gd="$CACHE.git/.git" ;;
	*) gd="$SEPOLICY_SRC" ;;
	esac
	git --git-dir="$gd" archive "$COMMIT" public private flagging | tar -x -C "$CACHE.tmp"
	rm -rf "$CACHE.git"
	mv "$CACHE.tmp" "$CACHE"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Android's build/soong/policy.go policyConfOrder: attributes before *.te.
{ echo "$CACHE/flagging/te_macros"; find "$CACHE/public" -maxdepth 1 -type f | sort
  find "$CACHE/private" -maxdepth 1 -type f | sort; echo "$TE"; } |
python3 -c '
import os, sys
order = ["security_classes", "initial_sids", "access_vectors", "global_macros", "neverallow_macros",
	"mls_macros", "mls_decl", "mls", "policy_capabilities", "te_macros", "ioctl_defines", "ioctl_macros",
	"attributes", "*.te", "roles_decl", "roles", "users", "initial_sid_contexts", "fs_use",
	"genfs_contexts", "port_contexts"]
def rank(p):
	n = os.path.basename(p)
	return order.index("*.te") if n.endswith(".te") else order.index(n) if n in order else None
fs = [l.strip() for l in sys.stdin if rank(l.strip()) is not None]
print("\n".join(sorted(fs, key=rank)))' > "$work/files"
# shellcheck disable=SC2046
m4 --fatal-warnings -D mls_num_sens=1 -D mls_num_cats=1024 -D target_arch=arm64 \
	-D target_with_asan=false -D target_with_dexpreopt=false -D target_with_native_coverage=false \
	-D target_build_variant=user -D target_full_treble=true -D target_compatible_property=true \
	-D target_treble_sysprop_neverallow=true -D target_enforce_sysprop_owner=true \
	-D target_exclude_build_test=false -D target_requires_insecure_execmem_for_swiftshader=false \
	-D target_enforce_debugfs_restriction=true -D target_recovery=false \
	-D target_board_api_level=1000000 -s $(cat "$work/files") > "$work/policy.conf"
# file_contexts: every type it names is declared by the kit's fragment
[ "$TE" != "$HERE/dist/android/lanes.te" ] || for ty in $(awk '!/^#/ && NF { split($2, a, ":"); print a[3] }' "$HERE/dist/android/file_contexts"); do
	grep -q "^type $ty[ ,;]" "$HERE/dist/android/lanes.te" || { echo "file_contexts: type $ty not declared in lanes.te"; exit 1; }
done
echo "system/sepolicy at $COMMIT; $(wc -l < "$work/files") files; checkpolicy $(checkpolicy -V | head -1)"
if checkpolicy -M -c 30 -o "$work/policy.bin" "$work/policy.conf" > "$work/out" 2>&1; then
	echo "android-sepolicy: compiles, 0 neverallow violations"
	exit 0
fi
grep -E 'neverallow|ERROR|error' "$work/out" | sed "s|$CACHE/||g; s|$HERE/||g"
echo "android-sepolicy: $(grep -c 'report_failure: neverallow' "$work/out" || true) neverallow violations"
exit 1
