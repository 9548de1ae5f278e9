#!/usr/bin/env bash
# screenshot-udp.sh: regenerate docs/dashboard-udp.png (as root; needs
# Chromium, scripts/deps.sh test installs it): the dashboard's UDP flows
# table in headless Chromium against a real daemon on a veth pair in fresh
# namespaces, a QUIC upload (quic-go) in background by `lanes run` and a
# plain UDP flow in interactive (internal/dashboard TestDashboardUDPInBrowser).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/docs/dashboard-udp.png
LANES_DASHBOARD_UDP_SCREENSHOT=$out ./scripts/go test -count=1 -run '^TestDashboardUDPInBrowser$' ./internal/dashboard/
echo "wrote $out"
