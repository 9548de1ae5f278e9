// Snapshot and watchdog: what a traffic test prints when a transfer hangs,
// taken while it hangs (qdisc and class counters, sockets, neighbours of
// every namespace on the path), so a hang seen once in a loaded CI run or
// a slow VM can be read afterwards instead of only timing out.

package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// snapshotCommands are run in each namespace of a snapshot.
var snapshotCommands = [][]string{
	{"ip", "-s", "neigh", "show"},
	{"tc", "-s", "qdisc", "show"},
	{"sh", "-c", "for d in /sys/class/net/*; do tc -s class show dev ${d##*/}; done"},
	{"ss", "-tinoem"},
	// -s: no history file (nstat's default keeps one per uid in /tmp)
	{"nstat", "-asz", "TcpExtTCPTimeouts", "TcpRetransSegs", "IpExtInNoRoutes", "TcpExtListenDrops", "TcpExtTCPSynRetrans"},
}

// Snapshot returns the output of snapshotCommands in each of the named
// namespaces, for a failure message.
func Snapshot(namespaces map[string]*NetNS) string {
	var b strings.Builder
	for name, ns := range namespaces {
		for _, c := range snapshotCommands {
			out, err := ns.Command(c[0], c[1:]...).CombinedOutput()
			fmt.Fprintf(&b, "== %s: %s (err %v)\n%s\n", name, strings.Join(c, " "), err, out)
		}
	}
	return b.String()
}

// Snapshot is the path's three namespaces' Snapshot.
func (p *Path) Snapshot() string {
	return Snapshot(map[string]*NetNS{"A": p.A, "R": p.R, "B": p.B})
}

// Watchdog logs take() once if stop has not been called within after; stop
// waits for a running take to finish, so the log lands inside the test.
func Watchdog(t testing.TB, after time.Duration, what string, take func() string) (stop func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	timer := time.AfterFunc(after, func() {
		defer wg.Done()
		t.Logf("%s: still running after %v; state now:\n%s", what, after, take())
	})
	return func() {
		if timer.Stop() {
			wg.Done()
		}
		wg.Wait()
	}
}
