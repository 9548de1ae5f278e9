#!/usr/bin/env bash
# screenshots.sh: regenerate the pictures in docs (as root; needs
# Chromium, scripts/deps.sh test installs it):
#   dashboard.png     the dashboard in headless Chromium: an interactive
#                     upload filling a 50 Mbit/s shaped uplink, a background
#                     flow held back behind it and a realtime flow of ~80 kbit/s,
#                     on a veth pair in fresh namespaces
#                     (internal/dashboard TestDashboardHeldAndRealtime)
#   dashboard-udp.png the dashboard's UDP flows table: a QUIC upload
#                     (quic-go) in background by `lanes run` and a plain
#                     UDP flow in interactive (TestDashboardUDPInBrowser)
#   lab-lbe-times.png a short lbe run's completion-time figure (methods
#                     3, 4 and 6 coincide in part; the paper's two points)
#   monitor-example.png  lanes plot of two cubic flows through a TBF
#                     bottleneck sampled by lanes monitor (scripts/monitor-example.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/docs
LANES_DASHBOARD_SCREENSHOT=$out/dashboard.png ./scripts/go test -count=1 -run '^TestDashboardHeldAndRealtime$' ./internal/dashboard/
LANES_DASHBOARD_UDP_SCREENSHOT=$out/dashboard-udp.png ./scripts/go test -count=1 -run '^TestDashboardUDPInBrowser$' ./internal/dashboard/
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
./scripts/go build -o "$tmp/lanes" ./cmd/lanes
LANES_TRACES=$PWD/traces "$tmp/lanes" lab run lbe --quick --dirs download --sizes 100,400 --methods 3,4,6 \
  --reps 2 --results "$tmp/results" >"$tmp/lbe.out"
cp "$(ls -d "$tmp"/results/lbe-*)/times.png" "$out/lab-lbe-times.png"
PATH=$tmp:$PATH ./scripts/monitor-example.sh "$tmp/flows.json" >/dev/null
cp "$tmp/flows.png" "$out/monitor-example.png"
echo "wrote $out/dashboard.png $out/dashboard-udp.png $out/lab-lbe-times.png $out/monitor-example.png"
