// rtd_test.go: lanes-rtd's EDF queue (rtd/queue.c) as a Queue, through
// its test driver (rtd/test/edf_diff.c) on a pipe, so that the hand cases
// and the differential test check the C against the Reference.
package edf

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
)

// driverCap is the driver's queue capacity; the workloads stay below it.
const driverCap = 4096

var (
	driverMu  sync.Mutex
	driverBin = map[string]string{}
)

// driver builds rtd/test/edf_diff.c once per set of extra flags.
func driver(t *testing.T, extra ...string) string {
	t.Helper()
	driverMu.Lock()
	defer driverMu.Unlock()
	key := strings.Join(extra, " ")
	if bin, ok := driverBin[key]; ok {
		return bin
	}
	// Room for the workloads' depths (rtdbuild.FuzzDefines has 512).
	extra = append([]string{"-UEDF_CAP", fmt.Sprintf("-DEDF_CAP=%d", driverCap)}, extra...)
	bin, err := rtdbuild.BuildWith(t.TempDir(), rtdbuild.CC(), "test/edf_diff.c", extra...)
	if err != nil {
		t.Fatal(err)
	}
	driverBin[key] = bin
	t.Cleanup(func() {
		driverMu.Lock()
		delete(driverBin, key)
		driverMu.Unlock()
	})
	return bin
}

// rtdQueue is lanes-rtd's queue in a driver process.
type rtdQueue struct {
	t       testing.TB
	in      io.WriteCloser
	out     *bufio.Scanner
	n       int
	backlog int64
	slack   int64 // M_1 after the last Admit or Pop, at its now
}

// newRtdQueue starts a driver built with the extra flags (e.g. -DEDFB=4:
// blocks of 4, which split and go all the time).
func newRtdQueue(t *testing.T, extra ...string) *rtdQueue {
	cmd := exec.Command(driver(t, extra...))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("rtd/test/edf_diff.c: %v", err)
		}
	})
	return &rtdQueue{t: t, in: in, out: bufio.NewScanner(out)}
}

// ask sends one line and scans the answer into vals; false for "empty".
func (q *rtdQueue) ask(line string, vals ...any) bool {
	q.t.Helper()
	if _, err := io.WriteString(q.in, line+"\n"); err != nil {
		q.t.Fatal(err)
	}
	if !q.out.Scan() {
		q.t.Fatalf("rtd/test/edf_diff.c: no answer to %q: %v", line, q.out.Err())
	}
	if q.out.Text() == "empty" {
		return false
	}
	if _, err := fmt.Sscan(q.out.Text(), vals...); err != nil {
		q.t.Fatalf("rtd/test/edf_diff.c: answer %q to %q: %v", q.out.Text(), line, err)
	}
	return true
}

func (q *rtdQueue) Admit(now int64, p Packet) Decision {
	var r int
	q.ask(fmt.Sprintf("a %d %d %d %d", now, p.Deadline, p.Tx, p.ID), &r, &q.slack, &q.n, &q.backlog)
	if r > int(Invalid) {
		q.t.Fatalf("lanes-rtd's queue: reason %d (full) at depth %d", r, q.n)
	}
	return Decision{OK: r == int(Admitted), Reason: Reason(r)}
}

func (q *rtdQueue) Pop(now int64) (Packet, bool, bool) {
	var p Packet
	var late int
	if !q.ask(fmt.Sprintf("p %d", now), &p.ID, &p.Deadline, &p.Tx, &late, &q.slack, &q.n, &q.backlog) {
		return Packet{}, false, false
	}
	return p, late == 1, true
}

func (q *rtdQueue) Peek() (Packet, bool) {
	var p Packet
	ok := q.ask("k", &p.ID, &p.Deadline, &p.Tx)
	return p, ok
}

func (q *rtdQueue) Len() int       { return q.n }
func (q *rtdQueue) Backlog() int64 { return q.backlog }
