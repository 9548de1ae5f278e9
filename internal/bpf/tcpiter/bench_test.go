// bench_test.go: the cost of one walk of the iterator (open + read to the
// end, no decoding) over N idle sockets of a fresh namespace:
// go test -run '^$' -bench . ./internal/bpf/tcpiter/   (root)
package tcpiter

import (
	"fmt"
	"net"
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
	lim := unix.Rlimit{Cur: uint64(n + 1000), Max: uint64(n + 1000)}
	if n > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			b.Skip(err)
		}
	}
	it, err := Load(Config{States: 1 << 1})
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	ns := testutil.NewNetNS(b)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	ns.Do(b, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		for range n / 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return err
			}
			s, err := ln.Accept()
			if err != nil {
				return err
			}
			conns = append(conns, c, s)
		}
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
