#!/usr/bin/env bash
# stress-test.sh RUNS PKG...: run the integration packages RUNS times in a row
# while two busy processes load the machine (the loaded 2-core machine the
# tests must pass on), stopping at the first failure. Then the leak check.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=$1; shift
busy=()
cleanup() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for _ in 1 2; do
  ( while :; do :; done ) &
  busy+=($!)
done
before=$(mktemp)
./scripts/go run ./internal/leaks/leakcheck -save "$before"
for i in $(seq 1 "$runs"); do
  echo "== stress run $i/$runs (2 busy processes)"
  ./scripts/go test -count=1 -p 1 -timeout 50m "$@"
done
./scripts/go run ./internal/leaks/leakcheck -since "$before"
rm -f "$before"
echo "stress-test: $runs runs passed under load"
