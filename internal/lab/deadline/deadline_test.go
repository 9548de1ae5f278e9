// deadline_test.go: the deadline experiment's bookkeeping, and a short run
// of the whole experiment in namespaces with generous pass marks.
package deadline

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestDeadlineSummarize(t *testing.T) {
	flows := []dlFlow{{ID: 1, Name: "A"}, {ID: 2, Name: "B"}}
	r := &dlRun{Records: []dlRecord{
		{Flow: 1, Seq: 1, Deadline: 1000, Send: 0, Enqueue: 10, Dequeue: 30, Arrive: 130, Receive: 180},
		{Flow: 1, Seq: 2, Deadline: 100, Send: 0, Enqueue: 20, Dequeue: 40, Arrive: 140, Receive: 150}, // late
		{Flow: 1, Seq: 3, Refused: "own-deadline-unmeetable"},
		{Flow: 2, Seq: 1, Dropped: true},
		{Flow: 2, Seq: 2, Send: 5}, // lost
	}}
	r.summarize(flows)
	a, b := r.Counts["A"], r.Counts["B"]
	if a.Sent != 3 || a.Refused != 1 || a.Late != 1 || a.Received != 2 || a.Misses != 1 {
		t.Errorf("A counts %+v", a)
	}
	if b.Sent != 2 || b.Dropped != 1 || b.Lost != 1 || b.Misses != 2 {
		t.Errorf("B counts %+v", b)
	}
	// generation (10+20)/2 ns = 0.015 µs; total max 180 ns = 0.18 µs
	if g := r.Stages["generation"]["A"]; math.Abs(g[0]-0.015) > 1e-9 || math.Abs(r.Stages["total"]["A"][1]-0.18) > 1e-9 {
		t.Errorf("stages %v", r.Stages)
	}
	if !math.IsNaN(r.Stages["queue"]["B"][0]) {
		t.Errorf("B has no delivered datagram, queue stage %v", r.Stages["queue"]["B"])
	}
	// residence: delivered datagrams only (refused, dropped and lost ones
	// have none), every flow together
	r.Records[0].Dequeue, r.Records[1].Dequeue = 2010, 6020 // 2 and 6 µs
	if n, want := residenceNote(r, flows), "flows A, B together, 2 datagrams: mean 4.0, p99 6.0, max 6.0 µs"; !strings.HasSuffix(n, want) {
		t.Errorf("residence note %q, want it to end %q", n, want)
	}
}

// TestDeadlineExperimentShort runs the experiment for one second per
// configuration. Pass marks are generous (a shared 2-core machine): the
// default FIFO misses most of flow B's 1 ms deadlines and the FIFO top
// class most tight datagrams of the inversion; lanes misses few of either.
func TestDeadlineExperimentShort(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("runs traffic for ~15 s")
	}
	p := dlParams{rate: 100_000_000, scale: 10, dur: time.Second, bulk: 2, bulkKind: "udp", prio: 20, procClient: true, qdisc: true}
	res, err := runDeadline(context.Background(), labtest.TestEnv(t), p)
	if err != nil {
		t.Fatal(err)
	}
	data := res.Data.(map[string]any)
	runs, inv := data["runs"].([]*dlRun), data["inversion"].([]*dlRun)
	byName := map[string]*dlRun{}
	for _, r := range runs {
		byName[r.Config] = r
	}
	pct := func(c dlCounts) float64 { return 100 * float64(c.Misses) / float64(max(c.Sent, 1)) }
	lanesB, defB := byName["lanes"].Counts["B"], byName["default"].Counts["B"]
	edfT, fifoT := inv[0].Counts["tight"], inv[1].Counts["tight"]
	t.Logf("B misses: lanes %.1f%%, default %.1f%%; inversion tight misses: EDF %.1f%%, FIFO %.1f%%",
		pct(lanesB), pct(defB), pct(edfT), pct(fifoT))
	if lanesB.Sent == 0 || pct(lanesB) > 10 || pct(defB) < 50 {
		t.Errorf("flow B: lanes %+v, default %+v", lanesB, defB)
	}
	if edfT.Sent == 0 || pct(edfT) > 10 || pct(fifoT) < 50 {
		t.Errorf("inversion tight: EDF %+v, FIFO %+v", edfT, fifoT)
	}
	if len(res.Tables) < 5 {
		t.Errorf("%d tables", len(res.Tables))
	}
	// The kernel path: its two tables where the kernel has a BPF qdisc,
	// else a note naming why it was skipped.
	notes := strings.Join(res.Notes, "\n")
	if why := qdiscSkip(); why != "" {
		if !strings.Contains(notes, "kernel path (qdisc) skipped: "+why) {
			t.Errorf("no note of the skipped kernel path in %s", notes)
		}
	} else if byName["qdisc"] == nil {
		t.Errorf("no qdisc run beside the daemon path")
	}
}
