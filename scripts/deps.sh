#!/usr/bin/env bash
# scripts/deps.sh [test|generate|demo]: install the Debian packages a make
# target needs, only those missing, so repeated runs cost nothing.
set -euo pipefail
want=(iproute2 procps util-linux kmod)
case "${1:-test}" in
  generate) want+=(clang llvm libbpf-dev linux-libc-dev bpftool) ;;
  # test: promtool (package prometheus) checks /metrics; chromium drives the
  # dashboard's browser test. Neither is started as a service by a test.
  test) want+=(rt-tests ethtool prometheus chromium) ;;
  demo) want+=(rt-tests ethtool) ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "deps: need root to install: ${missing[*]}" >&2; exit 1; fi
echo "deps: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
