// daemonpath_test.go: the daemon-path table row: latencies of the
// datagrams that arrived, in µs, and their three stages (no root).
package deadline

import (
	"testing"
)

func TestDaemonPathRow(t *testing.T) {
	// send -> enqueue -> dequeue -> arrive, in ns
	recs := []dlRecord{
		{Send: 0, Enqueue: 10_000, Dequeue: 30_000, Arrive: 100_000}, // 100 µs: 10 / 20 / 70
		{Send: 0, Enqueue: 20_000, Dequeue: 40_000, Arrive: 300_000}, // 300 µs: 20 / 20 / 260
		{Send: 0, Arrive: 2_000_000},                                 // 2000 µs, no stages recorded
		{Send: 0, Enqueue: 5_000, Refused: "deadline"},               // never arrived: left out
	}
	row, p50, p99, ok := daemonPathRow("lane", recs)
	if !ok {
		t.Fatal("no row")
	}
	if p50 != 300 || p99 < 1960 || p99 > 1966 { // 300 + 1700 * 0.98 = 1966
		t.Errorf("p50 %v p99 %v, want 300 and 1966", p50, p99)
	}
	want := []string{"lane", "3", "300.0", "1966", "2000", "15.0 / 19.9", "20.0 / 20.0", "165.0 / 258.1"}
	if len(row) != len(want) {
		t.Fatalf("row %q, want %q", row, want)
	}
	for i := range want {
		if row[i] != want[i] {
			t.Errorf("column %d: %q, want %q (row %q)", i, row[i], want[i], row)
		}
	}
	// stages: a column stays empty when no datagram recorded them
	row, _, _, ok = daemonPathRow("udp", []dlRecord{{Send: 0, Arrive: 50_000}})
	if !ok || row[1] != "1" || row[2] != "50.0" || row[5] != "" || row[6] != "" || row[7] != "" {
		t.Errorf("row without stages: %q", row)
	}
	if _, _, _, ok := daemonPathRow("none", []dlRecord{{Send: 5}}); ok {
		t.Error("a row for no arrivals")
	}
}
