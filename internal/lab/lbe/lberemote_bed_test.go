// lberemote_bed_test.go: one short lbe-remote testbed with the phone's
// daemon (default policy), checking what its per-socket monitor records.
package lbe

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/testutil"
)

// monitorRow is one socket's last row in a lanes monitor CSV.
type monitorRow struct{ state, lane, cong string }

// lastRows reads a lanes monitor CSV and returns each destination's last
// row (a row cut short by the monitor's end is skipped).
func lastRows(t *testing.T, path string) map[string]monitorRow {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var col map[string]int
	rows := map[string]monitorRow{}
	for sc.Scan() {
		rec, err := csv.NewReader(strings.NewReader(sc.Text())).Read()
		if err != nil {
			continue
		}
		if col == nil {
			col = map[string]int{}
			for i, name := range rec {
				col[name] = i
			}
			continue
		}
		if len(rec) != len(col) {
			continue
		}
		rows[rec[col["dst"]]] = monitorRow{rec[col["state"]], rec[col["lane"]], rec[col["cong"]]}
	}
	return rows
}

// TestRemoteMonitorNamesLanes: the monitor the lab runs in the phone
// (--monitor) names each socket's lane from the bed's own daemon. The two
// background downloads (the second a latecomer, as in the Jain step) are
// in the background lane on LEDBAT++, the interactive bulk download in
// the interactive lane on CUBIC. Before the monitor was given the bed's
// API socket it asked the default one, found no daemon there, and every
// row said "unset", so a socket on CUBIC could not be told from a
// background socket that escaped its lane.
func TestRemoteMonitorNamesLanes(t *testing.T) {
	testutil.RequireRoot(t)
	c := &RemoteConfig{FixedRate: 10e6, Delay: 10 * time.Millisecond, QueueTime: 200 * time.Millisecond,
		CC: "cubic", Lanes: labtest.LanesBinary(t), MonitorDir: t.TempDir()}
	m := RemoteMethods[methodIndex("full")]
	if m.ID != "full" || !m.Lanes {
		t.Fatalf("the default method is %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rb, err := newRemoteBed(ctx, labtest.TestEnv(t), c, "fixed", remoteCase{Method: m, Transport: TransportTCP})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			rb.bed.Close()
		}
	}()
	if err := rb.monitor("bed"); err != nil {
		t.Fatal(err)
	}
	// the background download, an interactive one, then the latecomer
	for _, s := range []struct {
		srv        *topo.Node
		background bool
	}{{rb.bg, true}, {rb.fg, false}, {rb.bg2, true}} {
		if _, err := rb.startBG("download", s.srv, s.background); err != nil {
			t.Fatal(err)
		}
		if err := testbed.SleepCtx(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	want := []wantRow{
		{rb.bg.Addr.String() + ":80", "background", "ledbat"},
		{rb.bg2.Addr.String() + ":80", "background", "ledbat"},
		{rb.fg.Addr.String() + ":80", "interactive", "cubic"},
	}
	// the latecomer's `lanes run`, helper and handshake took over the
	// second given to them beside the suite's other streams (no row of it
	// in the monitor's file): wait until every download's row is as wanted
	// (at most 20 s), then judge those last rows: read before the bed
	// closes, whose teardown ends the downloads (a row the monitor writes
	// then says FIN-WAIT-1)
	csvPath := filepath.Join(c.MonitorDir, "bed.csv")
	var rows map[string]monitorRow
	for deadline := time.Now().Add(20 * time.Second); ; {
		rows = lastRows(t, csvPath)
		if len(mismatches(rows, want)) == 0 || !time.Now().Before(deadline) {
			break
		}
		if err := testbed.SleepCtx(ctx, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	rb.bed.Close() // ends the monitor too
	closed = true
	for _, m := range mismatches(rows, want) {
		t.Error(m)
	}
}

// wantRow is a socket's wanted last row in the monitor: its destination,
// lane and the prefix of its congestion control.
type wantRow struct{ addr, lane, cong string }

// mismatches says how rows differ from want (none: as wanted).
func mismatches(rows map[string]monitorRow, want []wantRow) []string {
	var out []string
	for _, w := range want {
		r, ok := rows[w.addr]
		if !ok {
			out = append(out, fmt.Sprintf("no monitor row of the download from %s (rows: %v)", w.addr, rows))
			continue
		}
		if r.state != "ESTAB" || r.lane != w.lane || !strings.HasPrefix(r.cong, w.cong) {
			out = append(out, fmt.Sprintf("download from %s: last row %+v, want ESTAB in lane %s on %s…", w.addr, r, w.lane, w.cong))
		}
	}
	return out
}
