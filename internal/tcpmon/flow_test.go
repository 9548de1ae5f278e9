// flow_test.go: JSON-lines and CSV round trips of Flow, bad monitor files
// reported with their line, the /proc inode cache on a fake /proc, and the
// Prometheus text.
package tcpmon

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func sampleFlows() []Flow {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	return []Flow{
		{Time: t0, Cookie: 7, Src: "10.0.0.1:5000", Dst: "10.0.0.2:80", State: "ESTAB", Lane: lane.Background,
			PID: 12, Comm: "curl, the \"tool\"", CAState: "open", Cwnd: 10, SSThresh: 2147483647, SRTT: 1500,
			BytesAcked: 1 << 33, Throughput: 12345.5, DeliveryRate: 8000},
		{Time: t0.Add(100 * time.Millisecond), Cookie: 8, Src: "[::1]:1", Dst: "[::1]:2", State: "FIN-WAIT-1",
			Lane: lane.Unset, CAState: "loss", Cwnd: 1, Lost: 4},
	}
}

func TestFlowRoundTrip(t *testing.T) {
	for _, format := range []string{"json", "csv"} {
		var buf bytes.Buffer
		enc := NewJSONEncoder(&buf)
		if format == "csv" {
			enc = NewCSVEncoder(&buf)
		}
		in := sampleFlows()
		if err := enc.Encode(in[:1]); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(in[1:]); err != nil {
			t.Fatal(err)
		}
		out, err := ReadFlows(&buf)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if len(out) != len(in) {
			t.Fatalf("%s: %d flows back, want %d", format, len(out), len(in))
		}
		for i := range in {
			if !out[i].Time.Equal(in[i].Time) {
				t.Errorf("%s: time %v, want %v", format, out[i].Time, in[i].Time)
			}
			out[i].Time = in[i].Time
			if !reflect.DeepEqual(out[i], in[i]) {
				t.Errorf("%s: flow %d:\n got %+v\nwant %+v", format, i, out[i], in[i])
			}
		}
	}
}

func TestReadFlowsBad(t *testing.T) {
	var js, cs bytes.Buffer
	NewJSONEncoder(&js).Encode(sampleFlows())
	NewCSVEncoder(&cs).Encode(sampleFlows())
	jsLines := strings.SplitAfter(js.String(), "\n")
	csLines := strings.SplitAfter(cs.String(), "\n")
	for _, tc := range []struct {
		name, in string
		line     int
	}{
		{"json truncated last line", js.String()[:js.Len()-40], 2},
		{"json garbage line", jsLines[0] + "{not json}\n" + jsLines[1], 2},
		{"json unknown key", jsLines[0] + `{"time":"2026-01-02T03:04:05Z","bogus":1}` + "\n", 2},
		{"json wrong type", `{"time":"2026-01-02T03:04:05Z","cwnd":"ten"}` + "\n", 1},
		{"json no time", `{"cwnd":10}` + "\n", 1},
		{"csv truncated last line", cs.String()[:cs.Len()-5], 3},
		{"csv short row", csLines[0] + csLines[1] + "2026-01-02T03:04:05Z,1,2\n", 3},
		{"csv bad number", csLines[0] + strings.Replace(csLines[1], ",10,", ",ten,", 1), 2},
		{"csv unknown column", "time,colour\n", 1},
		{"csv bad quote", csLines[0] + `"unterminated` + "\n", 2},
	} {
		_, err := ReadFlows(strings.NewReader(tc.in))
		var le *LineError
		if !errors.As(err, &le) {
			t.Errorf("%s: error %v, want a LineError", tc.name, err)
			continue
		}
		if le.Line != tc.line {
			t.Errorf("%s: line %d, want %d (%v)", tc.name, le.Line, tc.line, err)
		}
	}
	if _, err := ReadFlows(strings.NewReader("")); err == nil {
		t.Error("empty file accepted")
	}
}

func TestProcCache(t *testing.T) {
	root := t.TempDir()
	mk := func(pid, comm string, links map[string]string) {
		fd := filepath.Join(root, pid, "fd")
		if err := os.MkdirAll(fd, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(root, pid, "comm"), []byte(comm+"\n"), 0o644)
		for n, target := range links {
			if err := os.Symlink(target, filepath.Join(fd, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("100", "server", map[string]string{"3": "socket:[555]", "4": "/dev/null", "5": "pipe:[9]"})
	mk("200", "child", map[string]string{"3": "socket:[555]", "7": "socket:[666]"})
	os.MkdirAll(filepath.Join(root, "self"), 0o755) // not a pid
	now := time.Unix(1000, 0)
	c := newProcCache(root, time.Second)
	if p, ok := c.lookup(555, now); !ok || p.PID != 100 || p.Comm != "server" {
		t.Errorf("inode 555 -> %+v %v, want the lower pid 100/server", p, ok)
	}
	if p, ok := c.lookup(666, now); !ok || p.PID != 200 {
		t.Errorf("inode 666 -> %+v %v", p, ok)
	}
	if c.scans != 1 {
		t.Errorf("%d scans, want 1 (second lookup from the cache)", c.scans)
	}
	// Unknown inode: at most one scan per refresh period.
	for i := 0; i < 5; i++ {
		if _, ok := c.lookup(777, now.Add(time.Duration(i)*time.Millisecond)); ok {
			t.Error("inode 777 found")
		}
	}
	if c.scans != 1 {
		t.Errorf("%d scans after misses within the period, want 1", c.scans)
	}
	// A caller keeping answers per scan asks again for a miss no scan
	// looked at, and keeps a found owner under the scan that found it.
	if _, gen := c.lookupGen(777, now.Add(5*time.Millisecond)); gen != -1 {
		t.Errorf("a miss held back by the refresh period: generation %d, want -1 (ask again)", gen)
	}
	if p, gen := c.lookupGen(555, now); p.PID != 100 || gen != c.scans {
		t.Errorf("a known inode: %+v generation %d, want pid 100 under scan %d", p, gen, c.scans)
	}
	mk("300", "late", map[string]string{"1": "socket:[777]"})
	if p, ok := c.lookup(777, now.Add(2*time.Second)); !ok || p.Comm != "late" {
		t.Errorf("new process not found after the refresh period: %+v %v", p, ok)
	}
	if _, ok := c.lookup(0, now); ok {
		t.Error("inode 0 (no owner) resolved")
	}
}

func TestReadEventsAndProbeFlows(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []Event{
		{Time: t0, Kind: "start", Src: "10.0.0.1:5000", Dst: "10.0.0.2:80", OldState: "SYN-SENT", NewState: "ESTAB"},
		{Time: t0.Add(time.Millisecond), Kind: "probe", Src: "10.0.0.1:5000", Dst: "10.0.0.2:80", Cwnd: 10, SRTT: 100, SndUna: 0xfffffff0},
		{Time: t0.Add(2 * time.Millisecond), Kind: "probe", Src: "10.0.0.1:5000", Dst: "10.0.0.2:80", Cwnd: 11, SRTT: 110, SndUna: 0x10}, // wraps: +0x20
		{Time: t0.Add(3 * time.Millisecond), Kind: "probe", Src: "10.0.0.1:5000", Dst: "10.0.0.2:80", Cwnd: 12, SndUna: 0x8},             // older ACK
		{Time: t0.Add(4 * time.Millisecond), Kind: "end", Src: "10.0.0.1:5000", Dst: "10.0.0.2:80", Duration: time.Second},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range evs {
		enc.Encode(&evs[i])
	}
	if !IsEventFile(buf.Bytes()) {
		t.Fatal("event file not recognised")
	}
	var fbuf bytes.Buffer
	NewJSONEncoder(&fbuf).Encode(sampleFlows())
	if IsEventFile(fbuf.Bytes()) {
		t.Fatal("sample file taken for events")
	}
	got, err := ReadEvents(bytes.NewReader(buf.Bytes()))
	if err != nil || len(got) != len(evs) {
		t.Fatalf("ReadEvents: %d events, %v", len(got), err)
	}
	fl := ProbeFlows(got)
	if len(fl) != 3 || fl[0].BytesAcked != 0 || fl[1].BytesAcked != 0x20 || fl[2].BytesAcked != 0x20 || fl[1].Cwnd != 11 {
		t.Errorf("ProbeFlows: %+v", fl)
	}
	cut := buf.Bytes()[:buf.Len()-20]
	var le *LineError
	if _, err := ReadEvents(bytes.NewReader(cut)); !errors.As(err, &le) || le.Line != 5 {
		t.Errorf("truncated event file: %v, want line 5", err)
	}
	if _, err := ReadEvents(strings.NewReader(`{"time":"2026-01-02T03:04:05Z","kind":"probe","cwnd":"x"}` + "\n")); !errors.As(err, &le) || le.Line != 1 {
		t.Errorf("bad event: %v", err)
	}
}

func TestFlowFigure(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var fl []Flow
	for i := 0; i < 50; i++ {
		at := t0.Add(time.Duration(i) * 20 * time.Millisecond)
		fl = append(fl,
			Flow{Time: at, Cookie: 1, Src: "10.0.0.1:1000", Dst: "10.0.0.2:80", CAState: "open", Cwnd: uint32(10 + i), SRTT: 2000, BytesAcked: uint64(i) * 25000, Comm: "big", Lane: lane.Background},
			Flow{Time: at, Cookie: 2, Src: "10.0.0.1:1001", Dst: "10.0.0.2:80", CAState: "open", Cwnd: 5, SRTT: 4000, BytesAcked: uint64(i) * 100},
			Flow{Time: at, Cookie: 3, Src: "10.0.0.1:1002", Dst: "10.0.0.2:80", State: "FIN-WAIT-2"}, // no tcp_info
		)
	}
	fig := FlowFigure(fl, FigureOptions{Title: "t", Smooth: 100 * time.Millisecond})
	if len(fig.Panels) != 3 {
		t.Fatalf("%d panels", len(fig.Panels))
	}
	cw := fig.Panels[0].Series
	// Legends name the process and lane; a flow of neither, its local port.
	if len(cw) != 2 || cw[0].Name != "big · background → 10.0.0.2:80" || cw[1].Name != ":1001 → 10.0.0.2:80" {
		t.Fatalf("series %q, %q: want the two flows with tcp_info, biggest first, by process and lane", cw[0].Name, cw[len(cw)-1].Name)
	}
	// Two flows of one process and lane to one place: their ports tell them apart.
	twin := []Flow{
		{Time: t0, Cookie: 7, Src: "10.0.0.1:2000", Dst: "10.0.0.2:443", CAState: "open", Comm: "restic", Lane: lane.Background},
		{Time: t0, Cookie: 8, Src: "10.0.0.1:2001", Dst: "10.0.0.2:443", CAState: "open", Comm: "restic", Lane: lane.Background},
	}
	if s := FlowFigure(twin, FigureOptions{}).Panels[0].Series; s[0].Name != "restic · background → 10.0.0.2:443 (:2000)" {
		t.Errorf("twins: %q", s[0].Name)
	}
	// A flow the yield held in some samples says for how much of them.
	heldFlow := append([]Flow(nil), twin[:1]...)
	for i := 1; i < 4; i++ {
		f := twin[0]
		f.Time, f.Held = t0.Add(time.Duration(i)*time.Second), i >= 2
		heldFlow = append(heldFlow, f)
	}
	if s := FlowFigure(heldFlow, FigureOptions{}).Panels[0].Series; s[0].Name != "restic · background (held 50%) → 10.0.0.2:443" {
		t.Errorf("held: %q", s[0].Name)
	}
	// So does one queued behind the other lanes.
	for i := range heldFlow {
		heldFlow[i].Held, heldFlow[i].Queued = false, i >= 1
	}
	if s := FlowFigure(heldFlow, FigureOptions{}).Panels[0].Series; s[0].Name != "restic · background (held 75%) → 10.0.0.2:443" {
		t.Errorf("queued: %q", s[0].Name)
	}
	if cw[0].Y[49] != 59 || fig.Panels[1].Series[1].Y[0] != 4 {
		t.Errorf("cwnd %v / rtt %v", cw[0].Y[49], fig.Panels[1].Series[1].Y[0])
	}
	// 25000 bytes per 20 ms = 10 Mbit/s once past the first half window.
	thr := fig.Panels[2].Series[0].Y
	if !math.IsNaN(thr[1]) || math.Abs(thr[20]-10) > 1e-9 {
		t.Errorf("throughput %v", thr[:21])
	}
	if got := FlowFigure(fl, FigureOptions{Top: 1, Match: ":100"}); len(got.Panels[0].Series) != 1 {
		t.Errorf("Top 1: %d series", len(got.Panels[0].Series))
	}
	if err := fig.WriteSVG(io.Discard); err != nil {
		t.Error(err)
	}
}

// TestProcScanIterator: a scan through the socket owner iterator finds
// this process's sockets as the /proc scan does (same pid and name).
func TestProcScanIterator(t *testing.T) {
	testutil.RequireRoot(t)
	it := newProcCache("/proc", time.Second)
	it.useIterator()
	if it.owners == nil {
		t.Skip("socket owner iterator unavailable (kernel or pid namespace): the /proc scan is used")
	}
	defer it.close()
	var inodes []uint32
	for range 3 {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		inodes = append(inodes, uint32(st.Ino))
	}
	proc := newProcCache("/proc", time.Second)
	now := time.Now()
	for _, ino := range inodes {
		want, ok := proc.lookup(ino, now)
		if !ok || want.PID != os.Getpid() {
			t.Fatalf("/proc scan: inode %d -> %+v %v, want pid %d", ino, want, ok, os.Getpid())
		}
		got, ok := it.lookup(ino, now)
		if !ok || got != want {
			t.Fatalf("iterator scan: inode %d -> %+v %v, /proc scan %+v", ino, got, ok, want)
		}
	}
	if it.scans != 1 {
		t.Fatalf("%d iterator scans, want 1", it.scans)
	}
}

// TestCongLabel: the app's request is shown beside what runs, and kept in
// the JSON and CSV records as a key of its own.
func TestCongLabel(t *testing.T) {
	f := Flow{Time: time.Unix(1, 0), Cong: "ledbat", AppCong: "cubic"}
	if got := f.CongLabel(); got != "ledbat (app: cubic)" {
		t.Errorf("CongLabel = %q", got)
	}
	if got := (&Flow{Cong: "cubic"}).CongLabel(); got != "cubic" {
		t.Errorf("CongLabel without a request = %q", got)
	}
	var b bytes.Buffer
	if err := NewJSONEncoder(&b).Encode([]Flow{f}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"cong":"ledbat","app_cong":"cubic"`) {
		t.Errorf("JSON %s", b.String())
	}
	back, err := ReadFlows(&b)
	if err != nil || len(back) != 1 || back[0].AppCong != "cubic" {
		t.Errorf("read back %+v, %v", back, err)
	}
}
