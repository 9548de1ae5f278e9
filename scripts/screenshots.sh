#!/usr/bin/env bash
# screenshots.sh: regenerate the pictures in docs (as root; needs
# Chromium, scripts/deps.sh test installs it):
#   dashboard.png     the dashboard in headless Chromium: an interactive
#                     flow, a background flow held by the yield and a
#                     realtime flow of ~80 kbit/s, on a veth pair in fresh
#                     namespaces (internal/dashboard TestDashboardHeldAndRealtime)
#   lab-lbe-times.png a short lbe run's completion-time figure (methods
#                     3, 4 and 6 coincide in part; the paper's two points)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/docs
LANES_DASHBOARD_SCREENSHOT=$out/dashboard.png ./scripts/go test -count=1 -run '^TestDashboardHeldAndRealtime$' ./internal/dashboard/
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
./scripts/go build -o "$tmp/lanes" ./cmd/lanes
LANES_TRACES=$PWD/traces "$tmp/lanes" lab run lbe --quick --dirs download --sizes 100,400 --methods 3,4,6 \
  --reps 2 --results "$tmp/results" >"$tmp/lbe.out"
cp "$(ls -d "$tmp"/results/lbe-*)/times.png" "$out/lab-lbe-times.png"
echo "wrote $out/dashboard.png $out/lab-lbe-times.png"
