// bench_test.go: CPU cost of the monitor.
//
//	BenchmarkSampleCPU/backend=B/sockets=N  samples N idle TCP sockets (N/2
//	  loopback connections in a fresh namespace) with backend B (bpf-track,
//	  bpf-iter, sock_diag or auto) at 10 Hz for 3 s and reports the process
//	  CPU time
//	  (user+system, getrusage: the kernel's walk is done in our read or
//	  recvmsg calls, so it is included) as percent of one core, and CPU and
//	  wall time per sample; for bpf-track also the CPU (and wall time) of its first sample,
//	  of the samples that follow it until every socket is tracked (their
//	  dearest), and of its periodic full walk (spread over several samples: their
//	  total and the dearest one). Targets: 10,000 sockets at 10 Hz under 2 % of a core; one sample
//	  of 100,000 sockets under 100 ms.
//	BenchmarkEventsCPU  traces tcp_probe for one connection between two
//	  helper processes (sender writes 1448-byte chunks with TCP_NODELAY as
//	  fast as the ACKs come back) and reports the event rate, the BPF
//	  programs' run time (kernel.bpf_stats) and the user-space reader's CPU.
//
// Run: go test -run '^$' -bench . -benchtime 1x ./internal/tcpmon/   (root)
package tcpmon

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

func cpuTime() time.Duration {
	u, s := cpuSplit()
	return u + s
}

// cpuSplit is the process's user and system CPU time so far.
func cpuSplit() (user, sys time.Duration) {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func BenchmarkSampleCPU(b *testing.B) {
	for _, tc := range []struct {
		n        int
		filtered bool // sample one connection (by port) among n sockets
	}{{10, false}, {1000, false}, {10000, false}, {10000, true}, {100000, false}} {
		for _, backend := range []string{BackendTrack, BackendIter, BackendDiag, ""} {
			benchSample(b, backend, tc.n, tc.filtered)
		}
	}
}

func benchSample(b *testing.B, backend string, n int, filtered bool) {
	name := fmt.Sprintf("backend=%s/sockets=%d", cmp.Or(backend, "auto"), n)
	if filtered {
		name += "/port-filter"
	}
	b.Run(name, func(b *testing.B) {
		testutil.RequireRoot(b)
		ns := testutil.NewNetNS(b)
		conns := openIdle(b, ns, n)
		// LANES_BENCH_NOPROC=1: no process lookup, as the coop
		// controller samples.
		cfg := Config{NetNS: ns.Handle, Interval: 100 * time.Millisecond, Backend: backend,
			NoProcess: os.Getenv("LANES_BENCH_NOPROC") == "1"}
		want := n
		if filtered {
			cfg.Filter.Port = conns.port
			want = 2
		}
		c0, t0 := cpuTime(), time.Now()
		s, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		newWall, newCPU := time.Since(t0), cpuTime()-c0
		defer s.Close()
		first := measureFirst(b, s)
		warmUp(b, s)
		b.ResetTimer()
		st := measureSteady(b, s, want)
		if s.track != nil {
			// New's own time: it loads the programs, and sizes and maps
			// the first walk's slots (tcpiter.Config.FirstSlots).
			b.ReportMetric(float64(newWall.Microseconds())/1000, "ms-wall/new")
			b.ReportMetric(float64(newCPU.Microseconds())/1000, "ms-cpu/new")
			first.report(b, name)
			reportResync(b, name, s, first.cpu)
		}
		st.report(b, name, s)
	})
}

// firstCost is what the first sample cost (the tracked mode's first full
// walk), and the tracked mode's tracking walk read over the samples after
// it.
type firstCost struct {
	cpu, wall, sys         time.Duration
	tracking, trackDearest time.Duration
	trackSpans             int
}

func measureFirst(b *testing.B, s *Sampler) firstCost {
	var f firstCost
	c0, t0 := cpuTime(), time.Now()
	_, s0 := cpuSplit()
	if _, err := s.Sample(); err != nil {
		b.Fatal(err)
	}
	f.cpu, f.wall = cpuTime()-c0, time.Since(t0)
	_, s1 := cpuSplit()
	f.sys = s1 - s0
	// The tracked mode's first walk tracks nothing in the kernel; the full
	// walk that does is read over the next samples (trackWalkChunk records
	// each): their dearest and total.
	for s.track != nil && s.track.untracked {
		c0 := cpuTime()
		if _, err := s.Sample(); err != nil {
			b.Fatal(err)
		}
		c := cpuTime() - c0
		f.tracking += c
		f.trackDearest = max(f.trackDearest, c)
		f.trackSpans++
	}
	return f
}

func (f firstCost) report(b *testing.B, name string) {
	b.ReportMetric(float64(f.cpu.Microseconds())/1000, "ms-cpu/first-sample")
	b.ReportMetric(float64(f.wall.Microseconds())/1000, "ms-wall/first-sample")
	b.Logf("%s: first sample %.3f ms CPU (%.3f ms in the kernel: the walk, the owner walk, page faults), %.3f ms wall",
		name, float64(f.cpu.Microseconds())/1000, float64(f.sys.Microseconds())/1000, float64(f.wall.Microseconds())/1000)
	b.ReportMetric(float64(f.trackDearest.Microseconds())/1000, "ms-cpu/tracking-sample")
	b.Logf("%s: the tracking walk after the first sample: %.3f ms CPU over %d samples (the dearest %.3f ms)",
		name, float64(f.tracking.Microseconds())/1000, f.trackSpans, float64(f.trackDearest.Microseconds())/1000)
}

// warmUp samples at 10 Hz for 2 s and at least 15 samples: the process
// cache, and the tracked mode's idle sockets reach their steady state (in
// the cold maps after 10 quiet looks).
func warmUp(b *testing.B, s *Sampler) {
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
	warm := 0
	err := s.Run(wctx, func([]Flow) error { warm++; return nil })
	wcancel()
	for ; err == nil && warm < 15; warm++ {
		_, err = s.Sample()
	}
	if err != nil {
		b.Fatal(err)
	}
}

// steadyCost is the sampler's cost at 10 Hz in the steady state, and the
// wall time of one sample on its own (back to back).
type steadyCost struct {
	cpu, wall, sys, alone time.Duration
	samples               int
}

func measureSteady(b *testing.B, s *Sampler, want int) steadyCost {
	const dur = 3 * time.Second
	var st steadyCost
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		_, s0 := cpuSplit()
		c0, t0 := cpuTime(), time.Now()
		err := s.Run(ctx, func(fl []Flow) error {
			st.samples++
			if len(fl) < want {
				return fmt.Errorf("sampled %d flows, want %d", len(fl), want)
			}
			return nil
		})
		st.cpu += cpuTime() - c0
		st.wall += time.Since(t0)
		_, s1 := cpuSplit()
		st.sys += s1 - s0
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	const alone = 5
	t0 := time.Now()
	for range alone {
		if _, err := s.Sample(); err != nil {
			b.Fatal(err)
		}
	}
	st.alone = time.Since(t0) / alone
	return st
}

func (st steadyCost) report(b *testing.B, name string, s *Sampler) {
	pct := 100 * st.cpu.Seconds() / st.wall.Seconds()
	perSample := float64(st.cpu.Microseconds()) / float64(st.samples) / 1000
	b.ReportMetric(pct, "%core")
	b.ReportMetric(perSample, "ms-cpu/sample")
	b.ReportMetric(float64(st.alone.Microseconds())/1000, "ms-wall/sample")
	b.ReportMetric(0, "ns/op")
	chosen, why := s.Backend()
	b.Logf("%s: %s (%s)", name, chosen, why)
	b.Logf("%s at 10 Hz: %.2f%% of one core (%.3f ms CPU, %.3f ms wall per sample, %.0f%% of the CPU in the kernel; %d samples)",
		name, pct, perSample, float64(st.alone.Microseconds())/1000, 100*st.sys.Seconds()/st.cpu.Seconds(), st.samples)
}

// reportResync measures the full walk the tracked mode starts every
// trackResync samples, read over several: the dearest of its samples (the
// target is per sample) and its total, amortized at 10 Hz.
func reportResync(b *testing.B, name string, s *Sampler, first time.Duration) {
	const fulls = 3
	var total, dearest time.Duration
	spans := 0
	for range fulls {
		s.track.resync = true
		for {
			c0 := cpuTime()
			if _, err := s.Sample(); err != nil {
				b.Fatal(err)
			}
			c := cpuTime() - c0
			total += c
			dearest = max(dearest, c)
			spans++
			if s.track.walk == nil {
				break
			}
		}
	}
	full := total / fulls
	b.ReportMetric(float64(dearest.Microseconds())/1000, "ms-cpu/walk-sample")
	b.ReportMetric(float64(full.Microseconds())/1000, "ms-cpu/full-walk")
	b.Logf("%s: first sample %.3f ms CPU; full walk %.3f ms CPU over %d samples (the dearest %.3f ms), every %d samples (%.1f s at 10 Hz): +%.3f%% of one core",
		name, float64(first.Microseconds())/1000, float64(full.Microseconds())/1000, spans/fulls,
		float64(dearest.Microseconds())/1000, trackResync, float64(trackResync)/10,
		100*full.Seconds()/(float64(trackResync)/10))
}

// idle is a set of idle connections in a namespace.
type idle struct {
	port uint16 // local port of one client (both of its ends match it)
}

// openIdle makes n/2 idle loopback connections (n sockets) in ns, without
// keepalive probes. Go turns them on by default, a probe every 15 s from
// each end: at 10,000 sockets ~130 sockets become active per sample and
// ~1,200 stay in the tracker's hot map, from 15 s after the set-up on, so
// whether they fell into the measured seconds depended on how long the
// set-up took. Up to
// 10,000 sockets this process holds both ends; beyond, the server ends
// stay in a listener's accept queue (sockets without descriptors) and the
// client ends are held by helper processes, since one process may not
// hold 100,000 descriptors here.
func openIdle(b *testing.B, ns *testutil.NetNS, n int) idle {
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	if n <= 10000 && lim.Cur < uint64(n+1000) {
		lim.Cur = min(lim.Max, uint64(n+1000))
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < uint64(n+200) {
			b.Skipf("need %d file descriptors, limit %d", n+200, lim.Cur)
		}
	}
	var out idle
	ns.Do(b, func() error {
		if err := widenPorts(); err != nil {
			return err
		}
		fd, addr, err := listenLoopback(b)
		if err != nil {
			return err
		}
		if n <= 10000 {
			out.port, err = holdIdle(b, fd, addr, n)
			return err
		}
		// One listener per helper: a local port can then serve each of
		// them, and connect() finds a free one at once.
		const per = 12500
		for left := n / 2; left > 0; left -= per {
			_, addr, err := listenLoopback(b)
			if err != nil {
				return err
			}
			if err := startDialHelper(b, addr, min(per, left)); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

// widenPorts gives the current namespace more ephemeral ports and a longer
// accept queue than the defaults (both sysctls are per namespace).
func widenPorts() error {
	for f, v := range map[string]string{
		"/proc/sys/net/ipv4/ip_local_port_range": "1024 65535",
		"/proc/sys/net/core/somaxconn":           "65535",
		"/proc/sys/net/ipv4/tcp_max_syn_backlog": "65535",
	} {
		if err := os.WriteFile(f, []byte(v), 0); err != nil {
			return err
		}
	}
	return nil
}

// listenLoopback opens a TCP listener on 127.0.0.1 and returns its fd and
// address; the fd stays open (and its accept queue holds the server ends)
// until the benchmark ends.
func listenLoopback(b *testing.B) (int, string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	b.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return -1, "", err
	}
	if err := unix.Listen(fd, 65535); err != nil {
		return -1, "", err
	}
	sa, _ := unix.Getsockname(fd)
	return fd, fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port), nil
}

// holdIdle dials n/2 connections to the listener (fd, addr) without
// keepalive and holds both ends in this process until the benchmark ends.
// It returns the first client's port.
func holdIdle(b *testing.B, fd int, addr string, n int) (uint16, error) {
	// a copy of fd for the File, which closes it (fd is the caller's)
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(dup), "listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var conns []net.Conn
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	d := net.Dialer{KeepAlive: -1}
	for range n / 2 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		s, err := ln.(*net.TCPListener).AcceptTCP()
		if err != nil {
			return 0, err
		}
		if err := s.SetKeepAlive(false); err != nil {
			return 0, err
		}
		conns = append(conns, c, s)
	}
	if len(conns) == 0 {
		return 0, nil
	}
	return uint16(conns[0].LocalAddr().(*net.TCPAddr).Port), nil
}

// startDialHelper starts a helper process that dials k connections to addr
// and holds the client ends until the benchmark ends (the server ends stay
// in the listener's accept queue).
func startDialHelper(b *testing.B, addr string, k int) error {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "dial", addr, strconv.Itoa(k))
	cmd.Env = append(os.Environ(), "LANES_TCPMON_HELPER=dial")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil {
		return fmt.Errorf("dial helper: %w", err)
	}
	return nil
}

func BenchmarkEventsCPU(b *testing.B) {
	// gap between the sender's 1448-byte writes: 0 = as fast as ACKs allow.
	// batch: the reader's MaxDelay (0: woken per event).
	for _, gap := range []time.Duration{0, 200 * time.Microsecond} {
		for _, batch := range []time.Duration{0, 50 * time.Millisecond} {
			b.Run(fmt.Sprintf("gap=%v/batch=%v", gap, batch), func(b *testing.B) { benchEvents(b, gap, batch) })
		}
	}
}

func benchEvents(b *testing.B, gap, batch time.Duration) {
	testutil.RequireRoot(b)
	p := testutil.NewVethPair(b)
	port := 47000 + int(time.Now().UnixNano()%1000)
	addr := net.JoinHostPort(p.AddrB.String(), strconv.Itoa(port))
	startHelper(b, p.B, "sink", addr)
	time.Sleep(300 * time.Millisecond) // let the sink listen
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	tr, err := OpenTracer(EventConfig{Probe: true, State: true, Ports: []uint16{uint16(port)}, RingSize: 4 << 20, MaxDelay: batch})
	if err != nil {
		b.Skipf("event mode: %v", err)
	}
	defer tr.Close()
	const dur = 3 * time.Second
	startHelper(b, p.A, "send", addr, "1448", gap.String(), (dur + time.Second).String(), "0s")
	time.Sleep(300 * time.Millisecond)
	b.ResetTimer()
	var cpu, wall, bpfTime time.Duration
	var events, acks, runs uint64
	sender := p.AddrA.String()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		bt0, br0 := tr.RunTime()
		c0, t0 := cpuTime(), time.Now()
		for {
			ev, err := tr.Next(ctx)
			if err != nil {
				break
			}
			events++
			if ev.Kind == "probe" && len(ev.Src) > len(sender) && ev.Src[:len(sender)] == sender {
				acks++
			}
		}
		cpu += cpuTime() - c0
		wall += time.Since(t0)
		bt1, br1 := tr.RunTime()
		bpfTime += bt1 - bt0
		runs += br1 - br0
		cancel()
	}
	secs := wall.Seconds()
	st := tr.Stats()
	b.ReportMetric(float64(acks)/secs, "acks/s")
	b.ReportMetric(float64(events)/secs, "events/s")
	b.ReportMetric(100*bpfTime.Seconds()/secs, "%core-bpf")
	b.ReportMetric(100*cpu.Seconds()/secs, "%core-reader")
	b.ReportMetric(0, "ns/op")
	perRun := 0.0
	if runs > 0 {
		perRun = float64(bpfTime.Nanoseconds()) / float64(runs)
	}
	b.Logf("event mode, batch %v: %.0f ACKs/s (%.0f events/s): BPF %.2f%% of one core (%.0f ns per run), reader %.2f%% of one core; dropped %d",
		batch, float64(acks)/secs, float64(events)/secs, 100*bpfTime.Seconds()/secs, perRun, 100*cpu.Seconds()/secs, st.Dropped)
}
