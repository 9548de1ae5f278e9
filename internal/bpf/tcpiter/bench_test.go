// bench_test.go: the cost of one walk of the iterator (open + read to the
// end, no decoding) over N idle sockets of a fresh namespace:
// go test -run '^$' -bench . ./internal/bpf/tcpiter/   (root)
package tcpiter

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

func BenchmarkWalk(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) { benchWalk(b, n) })
	}
}

func benchWalk(b *testing.B, n int) {
	testutil.RequireRoot(b)
	it, err := Load(Config{States: 1 << 1})
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	ns := testutil.NewNetNS(b)
	idleConns(b, ns, n)
	ns.Do(b, func() error {
		var rd Reader
		got := 0
		// The program's own run time (BPF_ENABLE_STATS, for this benchmark
		// only), to tell it from the kernel's iteration around it.
		stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err == nil {
			defer stats.Close()
		}
		var rt0 time.Duration
		if st, err := it.prog.Stats(); err == nil {
			rt0 = st.Runtime
		}
		b.ResetTimer()
		for b.Loop() {
			r, err := it.Open()
			if err != nil {
				return err
			}
			if err := rd.Each(r, func(*Rec) { got++ }); err != nil {
				return err
			}
			r.Close()
		}
		b.ReportMetric(float64(got)/float64(b.N), "sockets/walk")
		if st, err := it.prog.Stats(); err == nil && got > 0 {
			b.ReportMetric(float64((st.Runtime-rt0).Nanoseconds())/float64(got), "prog-ns/socket")
		}
		return nil
	})
}

// BenchmarkTrackerDelta: one change walk of the tracked mode over N idle
// sockets, CPU time of the walking thread per walk (the kernel's work is
// done in read); back to back, so with warm caches (the monitor's 10 Hz
// samples find them cold: BenchmarkSampleCPU in internal/tcpmon).
func BenchmarkTrackerDelta(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) { benchDelta(b, n) })
	}
}

func benchDelta(b *testing.B, n int) {
	testutil.RequireRoot(b)
	ns := testutil.NewNetNS(b)
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Handle), &st); err != nil {
		b.Fatal(err)
	}
	tr, err := LoadTracker(Config{States: 1 << 1}, uint32(st.Ino))
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	idleConns(b, ns, n)
	var rd Reader
	walk := func(open func() (io.ReadCloser, error)) int {
		r, err := open()
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		got := 0
		if err := rd.Each(r, func(*Rec) { got++ }); err != nil {
			b.Fatal(err)
		}
		return got
	}
	ns.Do(b, func() error { walk(tr.OpenFull); return nil })
	for range 20 { // past the hot map: idle sockets are in the cold ones
		walk(tr.OpenDelta)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	got := 0
	c0 := threadCPU()
	b.ResetTimer()
	for b.Loop() {
		got += walk(tr.OpenDelta)
	}
	cpu := threadCPU() - c0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "ms-cpu/walk")
	if n > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "ns-cpu/socket")
	}
	b.ReportMetric(float64(got)/float64(b.N), "records/walk")
}

// idleConns raises the file limit for n sockets and opens n/2 idle
// loopback connections in ns (both ends: n sockets), closed when the
// benchmark ends.
func idleConns(b *testing.B, ns *testutil.NetNS, n int) {
	b.Helper()
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	if need := uint64(n + 1000); lim.Cur < need {
		lim.Cur, lim.Max = need, max(lim.Max, need)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			b.Skipf("need %d file descriptors: %v", need, err)
		}
	}
	ns.Do(b, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		for range n / 2 {
			if _, _, err := testutil.Connect(b, ln); err != nil {
				return err
			}
		}
		return nil
	})
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
