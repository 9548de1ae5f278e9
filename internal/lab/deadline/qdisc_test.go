// qdisc_test.go: the kernel path (EDF BPF qdisc, SO_TXTIME) paired with
// the daemon path for a short run, where the kernel has a BPF qdisc (the
// 7.2 VM: KERNEL=7.2 scripts/kernel-vm.sh ./internal/lab/deadline/ --
// -test.run TestDeadlineQdiscPaired -test.v); skipped, naming the reason,
// elsewhere.
package deadline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestDeadlineQdiscPaired(t *testing.T) {
	testutil.RequireRoot(t)
	if why := qdiscSkip(); why != "" {
		t.Skipf("kernel path: %s", why)
	}
	b, err := newDLBed(100_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer b.t.Close()
	p := dlParams{rate: 100_000_000, scale: 10, dur: 2 * time.Second, bulk: 2, bulkKind: "udp", prio: 20, qdisc: true}
	flows := paperFlows(p.scale)
	env := labtest.TestEnv(t)
	var runs []*dlRun
	for _, cfg := range []string{"lanes", "qdisc"} {
		r, err := b.runConfig(context.Background(), env, p, cfg, flows, p.bulk, p.dur)
		if err != nil {
			t.Fatalf("%s: %v", cfg, err)
		}
		t.Logf("%s:%s notes %q", cfg, r.countLine(flows), r.Notes)
		runs = append(runs, r)
	}
	for _, f := range flows {
		if c := runs[1].Counts[f.Name]; c.Sent == 0 || c.Received == 0 {
			t.Errorf("qdisc flow %s: %+v, want datagrams sent and received", f.Name, c)
		}
	}
	if !strings.Contains(strings.Join(runs[1].Notes, " "), "qdisc: realtime enqueued") {
		t.Errorf("qdisc run without the qdisc's counters: %q", runs[1].Notes)
	}
	pt := pairTable("qdisc ÷ daemon", "daemon", "qdisc", runs[0], runs[1], pairMeasures)
	for _, row := range pt.Rows {
		t.Logf("%s: daemon n %s mean %s p99 %s max %s; qdisc n %s mean %s p99 %s max %s; qdisc ÷ daemon mean %s p99 %s",
			row[0], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10], row[11], row[12])
		if row[7] == "0" || row[11] == "-" || row[12] == "-" {
			t.Errorf("pair row %q has no qdisc figures or ratios", row[0])
		}
	}
	if len(pt.Rows) != len(pairMeasures) {
		t.Errorf("%d pair rows, want %d", len(pt.Rows), len(pairMeasures))
	}
}
