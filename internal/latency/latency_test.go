// Tests for the latency tester: histogram arithmetic and cyclictest parsing
// (pure), then short real runs as root: our tester beside cyclictest, and the
// net load actually delivering packets into the tested namespace.
package latency

import (
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestHistStats(t *testing.T) {
	h := newHist(100 * time.Microsecond)
	// 1..100 µs (+0.5 µs) and one 5 ms outlier beyond the bound.
	for i := 1; i <= 100; i++ {
		h.add(int64(i)*1000 + 500)
	}
	h.add(5_000_000)
	s := h.stats()
	if s.Samples != 101 || s.Overflow != 2 { // 100.5 µs and 5 ms are both >= 100 µs
		t.Fatalf("samples %d overflow %d, want 101 and 2", s.Samples, s.Overflow)
	}
	if s.MinUS != 1.5 || s.MaxUS != 5000 {
		t.Errorf("min %v max %v, want 1.5 and 5000", s.MinUS, s.MaxUS)
	}
	if s.P50US != 52 { // rank 51 -> sample 51.5 µs -> bin 51, upper edge 52
		t.Errorf("p50 %v, want 52", s.P50US)
	}
	if s.P99US != 5000 { // rank 100 falls in the overflow
		t.Errorf("p99 %v, want 5000 (overflow reported as max)", s.P99US)
	}
	want := (5050.0*1000 + 100*500 + 5_000_000) / 101 / 1000
	if math.Abs(s.AvgUS-want) > 1e-6 {
		t.Errorf("avg %v, want %v", s.AvgUS, want)
	}
}

func TestHistQuantileEdges(t *testing.T) {
	if got := HistQuantile(nil, 0, 0.5, 0); got != 0 {
		t.Errorf("empty: %v", got)
	}
	bins := []uint64{0, 0, 10}
	if got := HistQuantile(bins, 0, 0.99, 2.3); got != 2.3 {
		t.Errorf("quantile capped by max: got %v want 2.3", got)
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	bad := map[string]func(*Config){
		"policy":   func(c *Config) { c.Policy = "deadline" },
		"fifo0":    func(c *Config) { c.Policy, c.Priority = "fifo", 0 },
		"period":   func(c *Config) { c.Period = time.Microsecond },
		"noend":    func(c *Config) { c.Duration, c.Loops = 0, 0 },
		"cpu":      func(c *Config) { c.Affinity = []int{999} },
		"nice":     func(c *Config) { c.Priority = 40 },
		"threads":  func(c *Config) { c.Threads = 0 },
		"histzero": func(c *Config) { c.HistMax = 0 },
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("default config refused: %v", err)
	}
	for name, f := range bad {
		cc := c
		f(&cc)
		if err := cc.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseCyclictestJSON(t *testing.T) {
	// Shape of cyclictest 2.x --json output, two threads, -h 10.
	in := `{"num_threads": 2, "thread": {
	  "0": {"histogram": {"3": 5, "4": 4}, "cycles": 10, "min": 3, "max": 25, "avg": 5.50},
	  "1": {"histogram": {"2": 10}, "cycles": 10, "min": 2, "max": 2, "avg": 2.00}}}`
	r, err := ParseCyclictestJSON([]byte(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Threads) != 2 {
		t.Fatalf("threads %d", len(r.Threads))
	}
	t0 := r.Threads[0].Stats
	if t0.Overflow != 1 || t0.MaxUS != 25 || t0.P50US != 4 || t0.P99US != 25 {
		t.Errorf("thread 0: %+v", t0)
	}
	if r.All.Samples != 20 || r.All.MinUS != 2 || r.All.MaxUS != 25 || r.All.AvgUS != 3.75 {
		t.Errorf("all: %+v", r.All)
	}
	// cyclictest stops all threads when the first is done; a thread that
	// never ran has "avg": -nan.
	r, err = ParseCyclictestJSON([]byte(`{"thread": {"0": {"histogram": {"3": 2}, "cycles": 2, "min": 3, "max": 3, "avg": 3.00},
	  "1": {"histogram": {      }, "cycles": 0, "min": 1000000, "max": 0, "avg": -nan, "cpu": 1}}}`), 10)
	if err != nil {
		t.Fatalf("-nan: %v", err)
	}
	if r.All.Samples != 2 || r.All.MinUS != 3 || r.All.MaxUS != 3 {
		t.Errorf("with an empty thread: %+v", r.All)
	}
	if _, err := ParseCyclictestJSON([]byte(`{"thread":{"1":{}}}`), 10); err == nil {
		t.Error("missing thread 0 accepted")
	}
}

// TestAgreesWithCyclictest runs both tools the same way (SCHED_FIFO, pinned)
// and checks that their medians agree within a generous margin: both measure
// the same kernel timer path, so a gross disagreement is a bug in ours.
func TestAgreesWithCyclictest(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnlessCommand(t, "cyclictest")
	c := Config{Period: 5 * time.Millisecond, Loops: 200, Policy: "fifo", Priority: 80, Threads: 1,
		Affinity: []int{0}, HistMax: 20 * time.Millisecond}
	ours, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := RunCyclictest(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ours: %+v", brief(ours.All))
	t.Logf("cyclictest: %+v", brief(ct.All))
	if ours.All.Samples != 200 || ct.All.Samples != 200 {
		t.Fatalf("samples: ours %d cyclictest %d, want 200", ours.All.Samples, ct.All.Samples)
	}
	a, b := ours.All.P50US, ct.All.P50US
	if a > 5*b+200 || b > 5*a+200 {
		t.Errorf("medians disagree: ours %.0f µs, cyclictest %.0f µs", a, b)
	}
	if ours.All.MinUS <= 0 {
		t.Errorf("min %.1f µs: a timer cannot fire before its expiry", ours.All.MinUS)
	}
}

func TestThreadPolicyApplied(t *testing.T) {
	testutil.RequireRoot(t)
	tids := make(chan int, 1)
	c := Config{Period: 2 * time.Millisecond, Loops: 100, Policy: "rr", Priority: 7, Threads: 1, HistMax: time.Millisecond,
		Setup: func() error { tids <- unix.Gettid(); return nil }}
	done := make(chan error, 1)
	go func() { _, err := Run(c, nil); done <- err }()
	tid := <-tids
	time.Sleep(50 * time.Millisecond)
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatalf("sched_getattr(%d): %v (run: %v)", tid, err, <-done)
	}
	if attr.Policy != unix.SCHED_RR || attr.Priority != 7 {
		t.Errorf("measuring thread: policy %d prio %d, want SCHED_RR 7", attr.Policy, attr.Priority)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	self, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if self.Policy != unix.SCHED_NORMAL {
		t.Errorf("calling thread policy %d, want SCHED_OTHER (RT must stay on the measuring thread)", self.Policy)
	}
}

func TestNetLoadDelivers(t *testing.T) {
	testutil.RequireRoot(t)
	nl, err := StartNetLoad(NetLoadConfig{Rate: 5000, Duration: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close() })
	var inHost bool
	c := Config{Period: 10 * time.Millisecond, Loops: 50, Policy: "other", Threads: 1, HistMax: 10 * time.Millisecond,
		Setup: func() error {
			if err := nl.EnterHost(); err != nil {
				return err
			}
			// The host-side veth must be visible from the measuring thread.
			_, err := os.Stat("/proc/thread-self/net/dev")
			inHost = err == nil
			return nil
		}}
	if _, err := Run(c, nil); err != nil {
		t.Fatal(err)
	}
	sent, recv := nl.Counts()
	t.Logf("net load: sent %d (%d send errors), udp received %d in 0.5 s", sent, nl.f.errs.Load(), recv)
	if !inHost {
		t.Error("setup did not run in the host namespace")
	}
	if recv < 100 || sent < 2*recv-10 {
		t.Errorf("flood too small: sent %d received %d", sent, recv)
		for _, ns := range []netns.NsHandle{nl.Host, nl.Peer} {
			_ = inNS(ns, func() error {
				out, _ := exec.Command("sh", "-c", "ip -s link; ip addr; ip neigh; nstat -az | grep -iE 'udp|icmp|ip(In|Out)' ").CombinedOutput()
				t.Logf("netns %d:\n%s", ns, out)
				return nil
			})
		}
	}
	nl.Close()
	s2, r2 := nl.Counts()
	time.Sleep(50 * time.Millisecond)
	if s3, _ := nl.Counts(); s3 != s2 {
		t.Errorf("flood still running after Close (%d -> %d, recv %d)", s2, s3, r2)
	}
}

func brief(s Stats) Stats { s.Hist = nil; return s }

// TestMerge checks that rounds add up to what one run over all their
// samples would give.
func TestMerge(t *testing.T) {
	a, b, both := newHist(50*time.Microsecond), newHist(50*time.Microsecond), newHist(50*time.Microsecond)
	for i := int64(1); i <= 30; i++ {
		a.add(i * 1100)
		both.add(i * 1100)
		b.add(i*700 + 60_000) // all beyond the bound
		both.add(i*700 + 60_000)
	}
	ra := &Result{Tool: "lanes", Threads: []ThreadResult{{Stats: a.stats()}}, All: a.stats()}
	rb := &Result{Tool: "lanes", Threads: []ThreadResult{{Stats: b.stats()}}, All: b.stats()}
	got, want := Merge(ra, nil, rb).All, both.stats()
	if got.Samples != want.Samples || got.Overflow != want.Overflow || got.P50US != want.P50US ||
		got.P99US != want.P99US || got.MinUS != want.MinUS || got.MaxUS != want.MaxUS || math.Abs(got.AvgUS-want.AvgUS) > 1e-6 {
		t.Errorf("merged %+v\nwant %+v", brief(got), brief(want))
	}
	if ra.All.Samples != 30 {
		t.Errorf("Merge changed its input: %d samples", ra.All.Samples)
	}
}

func TestStopEndsRun(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	r, err := Run(Config{Period: time.Millisecond, Loops: 100000, Policy: "keep", Threads: 1, HistMax: time.Millisecond, PMLatency: -1}, stop)
	if err != nil {
		t.Fatal(err)
	}
	if r.All.Samples > 1000 {
		t.Errorf("%d samples after stop was closed, want the loop to end at once", r.All.Samples)
	}
}

func TestCyclictestArgsPMLatency(t *testing.T) {
	c := DefaultConfig()
	if a := strings.Join(CyclictestArgs(c, 10, "x"), " "); !strings.Contains(a, "--latency=0") {
		t.Errorf("default: %s, want --latency=0 as our tester holds", a)
	}
	c.PMLatency = -1
	if a := strings.Join(CyclictestArgs(c, 10, "x"), " "); !strings.Contains(a, "--laptop") {
		t.Errorf("pm latency left alone: %s, want --laptop", a)
	}
}
