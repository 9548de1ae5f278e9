// floor_bench_test.go: the kernel's floor under the first sample, the
// iter/tcp walk of N idle sockets (BenchmarkSampleCPU's set-up) read to
// its end with no decoding, once with a BPF program that does nothing
// (returns 0, writes nothing: what the iterator itself costs, the bucket
// walk, a reference and the socket lock per socket) and once with the
// monitor's walk program (tcpiter's dump, which the first sample reads).
// CPU of the reading thread (the walk runs in its read calls) and wall
// time, per walk. prog=dump/prefetch=alternate alternates walks of dump
// with and without the touches of the next socket (tcpiter.Config.Prefetch),
// one of each per iteration, and reports each one's figures:
//
//	go test -run '^$' -bench 'IterFloor' -benchtime 5x ./internal/tcpmon/   (root)
package tcpmon

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/testutil"
)

func BenchmarkIterFloor(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			testutil.RequireRoot(b)
			ns := testutil.NewNetNS(b)
			openIdle(b, ns, n)
			empty, err := emptyIter()
			if err != nil {
				b.Skip(err)
			}
			defer empty.Close()
			dump, err := tcpiter.Load(tcpiter.Config{States: 1 << 1})
			if err != nil {
				b.Skip(err)
			}
			defer dump.Close()
			b.Logf("prog=dump: prefetching %v", dump.Prefetching())
			emptyOpen := func() (io.ReadCloser, error) { return empty.Open() }
			b.Run("prog=empty", func(b *testing.B) { benchFloor(b, ns, emptyOpen) })
			b.Run("prog=dump", func(b *testing.B) {
				// The program's own run time (BPF_ENABLE_STATS, for this
				// run only), to tell it from the iteration around it.
				stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
				if err == nil {
					defer stats.Close()
				}
				rt0, _ := dump.RunTime()
				benchFloor(b, ns, dump.Open)
				if rt, err := dump.RunTime(); err == nil && stats != nil {
					b.ReportMetric(float64((rt-rt0).Nanoseconds())/float64(b.N)/float64(n), "prog-ns/socket")
				}
			})
			b.Run("prog=dump/prefetch=alternate", func(b *testing.B) { benchPrefetchPair(b, ns, n) })
			// Two walks at once, one per core: would a walk split in two
			// (each program emitting half the sockets) be shorter?
			b.Run("prog=empty/walkers=2", func(b *testing.B) { benchFloor2(b, ns, emptyOpen) })
			b.Run("prog=dump/walkers=2", func(b *testing.B) { benchFloor2(b, ns, dump.Open) })
		})
	}
}

// emptyIter is an iter/tcp iterator whose program returns 0 at once.
func emptyIter() (*link.Iter, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceIter, AttachTo: "tcp",
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return nil, err
	}
	defer prog.Close() // the link holds its own reference
	return link.AttachIter(link.IterOptions{Program: prog})
}

// benchFloor reads walks opened in ns to their end, on one locked thread.
func benchFloor(b *testing.B, ns *testutil.NetNS, open func() (io.ReadCloser, error)) {
	var cpu, wall time.Duration
	var bytes int64
	ns.Do(b, func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 1<<20)
		b.ResetTimer()
		for b.Loop() {
			c0, t0 := threadCPU(), time.Now()
			k, err := readWalk(open, buf)
			if err != nil {
				return err
			}
			bytes += k
			cpu += threadCPU() - c0
			wall += time.Since(t0)
		}
		return nil
	})
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "ms-cpu/walk")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(b.N)/1e6, "ms-wall/walk")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/walk")
}

// benchPrefetchPair alternates walks of the dump program with the
// touches of the next socket and without (tcpiter.PrefetchOn, Off), one
// of each per iteration, on one locked thread in ns, with BPF statistics
// on: per variant, CPU and wall time of a walk and the program's time a
// socket.
func benchPrefetchPair(b *testing.B, ns *testutil.NetNS, n int) {
	var its [2]*tcpiter.Iter
	for i, p := range []tcpiter.Prefetch{tcpiter.PrefetchOn, tcpiter.PrefetchOff} {
		it, err := tcpiter.Load(tcpiter.Config{States: 1 << 1, Prefetch: p})
		if err != nil {
			b.Skip(err)
		}
		defer it.Close()
		its[i] = it
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err == nil {
		defer stats.Close()
	}
	var cpu, wall, prog [2]time.Duration
	var walls [2][]float64 // each walk's wall time, ms (logged: medians)
	ns.Do(b, func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 1<<20)
		b.ResetTimer()
		for k := 0; b.Loop(); k++ {
			for j := range 2 {
				i := (j + k) % 2 // which goes first alternates too
				rt0, _ := its[i].RunTime()
				c0, t0 := threadCPU(), time.Now()
				if _, err := readWalk(its[i].Open, buf); err != nil {
					return err
				}
				cpu[i] += threadCPU() - c0
				w := time.Since(t0)
				wall[i] += w
				walls[i] = append(walls[i], float64(w.Microseconds())/1000)
				rt, _ := its[i].RunTime()
				prog[i] += rt - rt0
			}
		}
		return nil
	})
	for i, name := range []string{"on", "off"} {
		b.Logf("prefetch=%s: walls (ms) %v", name, walls[i])
		b.ReportMetric(float64(cpu[i].Nanoseconds())/float64(b.N)/1e6, "ms-cpu/walk-"+name)
		b.ReportMetric(float64(wall[i].Nanoseconds())/float64(b.N)/1e6, "ms-wall/walk-"+name)
		if stats != nil {
			b.ReportMetric(float64(prog[i].Nanoseconds())/float64(b.N)/float64(n), "prog-ns/socket-"+name)
		}
	}
}

// benchFloor2 starts two walks at once on two threads and waits for both:
// wall time of the pair, CPU of both threads.
func benchFloor2(b *testing.B, ns *testutil.NetNS, open func() (io.ReadCloser, error)) {
	var cpu, wall time.Duration
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		cpus := make([]time.Duration, 2)
		errs := make([]error, 2)
		t0 := time.Now()
		for i := range 2 {
			wg.Go(func() {
				errs[i] = ns.Run(func() error {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					c0 := threadCPU()
					_, err := readWalk(open, make([]byte, 1<<20))
					cpus[i] = threadCPU() - c0
					return err
				})
			})
		}
		wg.Wait()
		wall += time.Since(t0)
		cpu += cpus[0] + cpus[1]
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "ms-cpu/pair")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(b.N)/1e6, "ms-wall/pair")
}

// readWalk opens a walk and reads it to its end: the bytes read.
func readWalk(open func() (io.ReadCloser, error), buf []byte) (int64, error) {
	r, err := open()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF || (k == 0 && err == nil) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
