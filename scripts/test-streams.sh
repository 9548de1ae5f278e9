#!/usr/bin/env bash
# test-streams.sh: make test's go tests as three streams side by side, each
# a `go test` of its own, its lines prefixed with its name:
#   daemon  the daemon package (its traffic tests three at a time)
#   others  every other package, one at a time (-p 1)
#   race    every package's short tests under the race detector, one at a time
# Most of the suite waits on emulated links (20 % of two cores in sequence),
# so the streams share the machine.
# Every test runs on namespaces, links and a daemon of its own, and counts
# only what it made. Ends with the list of failed tests (the last lines a
# CI log keeps). Exits 1 if any stream failed.
# Usage: scripts/test-streams.sh TMPDIR
set -u
cd "$(dirname "$0")/.."
tmp=$1
go=./scripts/go
logs=$(mktemp -d /tmp/lanes-streams.XXXXXX)
trap 'rm -rf "$logs"' EXIT
others=$($go list ./... | grep -vx 'github.com/lanes-net/lanes/internal/daemon')

stream() { # name, then the go test arguments
	local name=$1
	shift
	TMPDIR=$tmp "$@" 2>&1 | sed -u "s/^/[$name] /" | tee "$logs/$name"
	local rc=${PIPESTATUS[0]}
	echo "[$name] exit $rc"
	return "$rc"
}

stream daemon $go test -count=1 -p 1 -parallel 3 -timeout 50m ./internal/daemon/ &
daemon=$!
# shellcheck disable=SC2086 # the package list splits on purpose
stream others $go test -count=1 -p 1 -timeout 50m $others &
others_pid=$!
stream race env CGO_ENABLED=1 $go test -race -short -count=1 -p 1 -timeout 30m ./... &
race=$!

rc=0
for pid in $daemon $others_pid $race; do
	wait "$pid" || rc=1
done
if [ $rc -ne 0 ]; then
	echo "failed:"
	grep -hE '^\[[a-z]+\] +--- FAIL|^\[[a-z]+\] (FAIL|panic:)' "$logs"/* || true
fi
exit $rc
