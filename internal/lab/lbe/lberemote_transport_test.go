// lberemote_transport_test.go: the background's transport as an axis of
// lbe-remote, without a testbed: the flag, the testbeds of a round, the
// helpers' command lines, the pairing across transports and the rows.
package lbe

import (
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

func TestParseTransports(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"tcp", []string{"tcp"}, ""},
		{"tcp,tcp-app-cc,quic", []string{"tcp", "tcp-app-cc", "quic"}, ""},
		{" quic , tcp ", []string{"quic", "tcp"}, ""},
		{"tcp,,quic,", []string{"tcp", "quic"}, ""},
		{"", nil, "no background transport"},
		{"udp", nil, `bad background transport "udp"`},
		{"tcp,quic,tcp", nil, `"tcp" given twice`},
	} {
		got, err := parseTransports(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseTransports(%q) = %v, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseTransports(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// The method without background runs once, every other method once per
// transport, in the order of the methods given (the seed's shuffle of
// methods alone is unchanged with one transport).
func TestRemoteCases(t *testing.T) {
	methods := []RemoteMethod{RemoteMethods[0], RemoteMethods[1], RemoteMethods[4]} // none, cubic, full
	name := func(cs []remoteCase) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Method.ID+"/"+c.Transport)
		}
		return out
	}
	for _, c := range []struct {
		transports []string
		want       []string
	}{
		{[]string{"tcp"}, []string{"none/", "cubic/tcp", "full/tcp"}},
		{[]string{"tcp", "tcp-app-cc", "quic"}, []string{"none/", "cubic/tcp", "cubic/tcp-app-cc", "cubic/quic", "full/tcp", "full/tcp-app-cc", "full/quic"}},
	} {
		if got := name(remoteCases(methods, c.transports)); !slices.Equal(got, c.want) {
			t.Errorf("transports %v: cases %v, want %v", c.transports, got, c.want)
		}
	}
}

// A background flow's helper: tcp-app-cc is tcp plus the app's own
// congestion control; the interactive bulk flow is plain TCP whatever the
// background's transport.
func TestBGHelperArgs(t *testing.T) {
	srv := &topo.Node{Addr: netip.MustParseAddr("10.77.0.3")}
	for _, c := range []struct {
		transport, dir string
		background     bool
		want           string
	}{
		{"tcp", "upload", true, "bulk --url http://10.77.0.3:80"},
		{"tcp", "download", true, "get --url http://10.77.0.3:80 --bytes 100000000000 --timeout 1h"},
		{"tcp-app-cc", "upload", true, "bulk --url http://10.77.0.3:80 --app-cc cubic"},
		{"tcp-app-cc", "download", true, "get --url http://10.77.0.3:80 --bytes 100000000000 --timeout 1h --app-cc cubic"},
		{"tcp-app-cc", "upload", false, "bulk --url http://10.77.0.3:80"},
		{"quic", "upload", true, "quic-bulk --to 10.77.0.3:4433 --dir up"},
		{"quic", "download", true, "quic-bulk --to 10.77.0.3:4433 --dir down"},
		{"quic", "download", false, "get --url http://10.77.0.3:80 --bytes 100000000000 --timeout 1h"},
	} {
		rb := &remoteBed{transport: c.transport}
		if got := strings.Join(rb.bgHelperArgs(c.dir, srv, c.background), " "); got != c.want {
			t.Errorf("%s %s background=%v: %q, want %q", c.transport, c.dir, c.background, got, c.want)
		}
	}
}

// Every transport's runs are paired with the one no-background run of the
// same link, direction and round, and the share alone with the CUBIC
// background over the same transport; each cell keeps its transport.
// (Of two probes, pctl's p95 is the lower.)
func TestSummarizeRemoteTransports(t *testing.T) {
	tr := func(s float64) []RemoteTrial { return []RemoteTrial{{Dir: "upload", SizeKB: 10, Seconds: s}} }
	runs := []RemoteRun{
		{Link: "fixed", BGDir: "upload", Method: "none", ProbeMs: []float64{40, 40}, Trials: tr(1)},
		{Link: "fixed", BGDir: "upload", Method: "cubic", Transport: "tcp", ProbeMs: []float64{300, 340}, ProbeLost: 2, Trials: tr(5), BGAlone: 1},
		{Link: "fixed", BGDir: "upload", Method: "full", Transport: "tcp", ProbeMs: []float64{50, 55}, Trials: tr(1.1), BGAlone: 0.9},
		{Link: "fixed", BGDir: "upload", Method: "cubic", Transport: "quic", ProbeMs: []float64{140, 150}, Trials: tr(4), BGAlone: 0.8},
		{Link: "fixed", BGDir: "upload", Method: "full", Transport: "quic", ProbeMs: []float64{45, 60}, Trials: tr(1.2), BGAlone: 0.72},
		{Link: "fixed", BGDir: "upload", Method: "full", Transport: "tcp-app-cc", ProbeMs: []float64{48, 52}, Trials: tr(1), BGAlone: 0.9, BGSocketCC: "lanes_ledbat"},
	}
	want := []struct {
		transport, method string
		infl95, ratio     float64
		vsCubic           float64
		lost, sent        int
		cc                string
	}{
		{"", "none", 0, 1, 0, 0, 2, ""},
		{"tcp", "cubic", 260, 5, 1, 2, 4, ""},
		{"tcp", "full", 10, 1.1, 0.9, 0, 2, ""},
		{"tcp-app-cc", "full", 8, 1, 0, 0, 2, "lanes_ledbat"},
		{"quic", "cubic", 100, 4, 1, 0, 2, ""},
		{"quic", "full", 5, 1.2, 0.9, 0, 2, ""},
	}
	cells := summarizeRemote(runs)
	if len(cells) != len(want) {
		t.Fatalf("%d cells, want %d: %+v", len(cells), len(want), cells)
	}
	for i, w := range want {
		c := cells[i]
		if c.Transport != w.transport || c.Method != w.method || math.Abs(c.Infl95-w.infl95) > 1e-9 ||
			math.Abs(c.FCTRatio["upload 10 KB"]-w.ratio) > 1e-9 || math.Abs(c.AloneVsCubic-w.vsCubic) > 1e-9 ||
			c.ProbeLost != w.lost || c.ProbeSent != w.sent || c.BGSocketCC != w.cc {
			t.Errorf("cell %d: %s/%s inflation p95 %v ratio %v alone÷CUBIC %v lost %d of %d cc %q; want %+v",
				i, c.Transport, c.Method, c.Infl95, c.FCTRatio["upload 10 KB"], c.AloneVsCubic, c.ProbeLost, c.ProbeSent, c.BGSocketCC, w)
		}
	}
	c := &RemoteConfig{FGDirs: []string{"upload"}, SizesKB: []int{10}, Warmup: 10 * time.Second}
	tables := remoteTables(cells, c)
	for _, tb := range tables {
		if tb.Columns[2] != "transport" {
			t.Errorf("table %q: third column %q, want transport", tb.Title, tb.Columns[2])
		}
	}
	if got := strings.Join(tables[0].Rows[0], " "); got != "fixed upload - none 40.0 40.0 0.0 0.0 0 of 2" {
		t.Errorf("probe row without background: %q", got)
	}
	if got := tables[2].Rows[2]; got[2] != "tcp-app-cc" || got[len(got)-1] != "lanes_ledbat" {
		t.Errorf("share row of tcp-app-cc: %q", got)
	}
}

// Rounds whose app-CC socket ended on different congestion controls are
// all named.
func TestSummarizeRemoteSocketCC(t *testing.T) {
	for _, c := range []struct {
		ccs  []string
		want string
	}{
		{[]string{"lanes_ledbat", "lanes_ledbat"}, "lanes_ledbat"},
		{[]string{"lanes_ledbat", "cubic", "lanes_ledbat"}, "lanes_ledbat/cubic"},
		{[]string{"", ""}, ""},
	} {
		var runs []RemoteRun
		for i, cc := range c.ccs {
			runs = append(runs, RemoteRun{Link: "fixed", BGDir: "upload", Method: "full", Transport: "tcp-app-cc", Round: i, BGSocketCC: cc})
		}
		if got := summarizeRemote(runs)[0].BGSocketCC; got != c.want {
			t.Errorf("%v: %q, want %q", c.ccs, got, c.want)
		}
	}
}

// Figures come once per transport: tcp's keep their names, the others'
// end in -TRANSPORT.
func TestRemotePlotsPerTransport(t *testing.T) {
	trials := []RemoteTrial{{Dir: "download", SizeKB: 10, Seconds: 0.1}}
	tl := map[string][]float64{"capacity": {10, 10}, "bg": {9, 5}, "bg2": {0, 4}, "fg": {0, 1}}
	runs := []RemoteRun{{Link: "fixed", BGDir: "upload", Method: "none", ProbeMs: []float64{40}, Trials: trials}}
	for _, tr := range []string{"tcp", "tcp-app-cc", "quic"} {
		runs = append(runs, RemoteRun{Link: "fixed", BGDir: "upload", Method: "full", Transport: tr,
			ProbeMs: []float64{45}, Trials: trials, Timeline: tl, JainFrom: 1})
	}
	res := &testbed.Result{Experiment: "lbe-remote", Started: time.Now(), Data: map[string]any{"runs": runs}}
	dir, err := testbed.WriteResult(t.TempDir(), res)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fct-bg-upload", "rtt-bg-upload-tcp-app-cc", "timeline-fixed-upload-quic", "fct-bg-upload-quic"} {
		if st, err := os.Stat(filepath.Join(dir, name+".png")); err != nil || st.Size() < 500 {
			t.Errorf("%s.png: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fct-bg-upload-tcp.png")); err == nil {
		t.Errorf("tcp's figures got a suffix")
	}
}
