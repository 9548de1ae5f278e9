// helpers_test.go: test plumbing: servers and clients inside test network
// namespaces, and a sender helper process (this test binary re-executed)
// that can be started inside a namespace and a cgroup.
package tcpmon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/testutil"
)

//go:generate sh -c "clang-19 -target bpf -mcpu=v1 -nostdinc -I../bpf/include -O2 -g -Wall -Werror -fno-ident -fdebug-compilation-dir=. -c testdata/cwndclamp.c -o testdata/cwndclamp.o && llvm-strip-19 -g testdata/cwndclamp.o"

// sink is a TCP server that reads and counts everything it receives.
type sink struct {
	ln       net.Listener
	total    atomic.Int64
	accepted atomic.Int64 // connections accept() returned
	mu       sync.Mutex
	marks    []recvMark // (time, cumulative bytes) after every read
	done     chan struct{}
}

type recvMark struct {
	t time.Time
	n int64
}

// newSink listens on addr inside ns (addr "10.x.0.2:0" picks a port).
func newSink(t *testing.T, ns *testutil.NetNS, addr string) *sink {
	t.Helper()
	s := &sink{done: make(chan struct{})}
	ns.Do(t, func() error {
		var err error
		s.ln, err = net.Listen("tcp", addr)
		return err
	})
	t.Cleanup(func() { s.ln.Close() })
	go func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 256<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						tot := s.total.Add(int64(n))
						s.mu.Lock()
						s.marks = append(s.marks, recvMark{time.Now(), tot})
						s.mu.Unlock()
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// waitAccepted waits until accept() returned n connections: only then has
// the server's end an owner (the pid, comm and cgroup filters need one);
// a fixed sleep is a guess on a loaded machine.
func (s *sink) waitAccepted(t *testing.T, n int64) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); s.accepted.Load() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("server accepted %d connections of %d", s.accepted.Load(), n)
		}
	}
}

func (s *sink) port() uint16 { return uint16(s.ln.Addr().(*net.TCPAddr).Port) }

// countAt is the receiver's byte count at time t.
func (s *sink) countAt(t time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, m := range s.marks {
		if m.t.After(t) {
			break
		}
		n = m.n
	}
	return n
}

// dialIn connects from inside ns.
func dialIn(t *testing.T, ns *testutil.NetNS, addr string) *net.TCPConn {
	t.Helper()
	var c net.Conn
	ns.Do(t, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	})
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// writeFor writes chunk-sized blocks every gap (0: as fast as possible)
// until d has passed or ctx ends; it returns the bytes written.
func writeFor(ctx context.Context, c io.Writer, chunk int, gap, d time.Duration) int64 {
	buf := make([]byte, chunk)
	var n int64
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		w, err := c.Write(buf)
		n += int64(w)
		if err != nil {
			return n
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	return n
}

// The helper process: `LANES_TCPMON_HELPER=send ADDR CHUNK GAP DURATION HOLD`
// connects to ADDR, writes, then keeps the connection open for HOLD.
func TestMain(m *testing.M) {
	switch os.Getenv("LANES_TCPMON_HELPER") {
	case "send":
		os.Exit(helperSend(os.Args[len(os.Args)-5:]))
	case "sink":
		os.Exit(helperSink(os.Args[len(os.Args)-1]))
	case "dial":
		os.Exit(helperDial(os.Args[len(os.Args)-2:]))
	}
	os.Exit(m.Run())
}

func helperSend(a []string) int {
	chunk, _ := strconv.Atoi(a[1])
	gap, _ := time.ParseDuration(a[2])
	d, _ := time.ParseDuration(a[3])
	hold, _ := time.ParseDuration(a[4])
	c, err := net.DialTimeout("tcp", a[0], 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	c.(*net.TCPConn).SetNoDelay(true)
	writeFor(context.Background(), c, chunk, gap, d)
	time.Sleep(hold)
	c.Close()
	return 0
}

// helperDial (`dial ADDR N`) opens N idle connections to ADDR (without
// Go's default keepalive probes, which would make them active), says
// "ready" on stdout and holds them until its stdin closes: one process can
// only hold so many descriptors, so large socket counts are spread over a
// few of these.
func helperDial(a []string) int {
	n, _ := strconv.Atoi(a[1])
	conns := make([]net.Conn, 0, n)
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: -1}
	for range n {
		c, err := d.Dial("tcp", a[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// helperSink accepts connections on addr and discards what they send.
func helperSink(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go io.Copy(io.Discard, c)
	}
}

// startHelper runs the helper in mode inside ns with args.
func startHelper(t testing.TB, ns *testutil.NetNS, mode string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, self, "-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "LANES_TCPMON_HELPER="+mode)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// startSender runs the helper inside ns; cgroupFD >= 0 starts it in that
// cgroup (clone3 CLONE_INTO_CGROUP). It is killed at the end of the test.
func startSender(t *testing.T, ns *testutil.NetNS, cgroupFD int, addr string, chunk int, gap, d, hold time.Duration) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, self, "-test.run=^$", "--",
		addr, strconv.Itoa(chunk), gap.String(), d.String(), hold.String())
	cmd.Env = append(os.Environ(), "LANES_TCPMON_HELPER=send")
	cmd.Stderr = os.Stderr
	if cgroupFD >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgroupFD}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sender: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// newSampler opens a sampler in ns, closed at the end of the test.
// iterBackends returns sock_diag, and the BPF iterator unless this kernel
// lacks a feature it needs (tcpiter.Probe says ebpf.ErrNotSupported: before
// 5.12 a tracing program has no bpf_get_socket_cookie). That is logged with
// the probe's reason, not a failure: the monitor then samples through
// sock_diag. Any other load error fails the test that samples through it.
func iterBackends(t *testing.T) []string {
	t.Helper()
	if err := tcpiter.Probe(); errors.Is(err, ebpf.ErrNotSupported) {
		t.Logf("%s not checked: TCP iterator unavailable on this kernel: %v", BackendIter, err)
		return []string{BackendDiag}
	}
	return []string{BackendDiag, BackendIter}
}

// requireTracker skips t when the kernel lacks a feature of the iterator
// or of the tracked mode (tcpiter.Probe, tcpiter.ProbeTracker), naming it.
func requireTracker(t *testing.T) {
	t.Helper()
	if err := tcpiter.Probe(); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("TCP iterator unavailable on this kernel (the monitor samples through sock_diag): %v", err)
	}
	if err := tcpiter.ProbeTracker(); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("TCP tracker unavailable on this kernel (the monitor walks every socket): %v", err)
	}
}

func newSampler(t *testing.T, cfg Config) *Sampler {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sampleUntil samples every interval until cond holds for a sample or
// timeout; it returns all samples taken.
func sampleUntil(t *testing.T, s *Sampler, timeout time.Duration, cond func([]Flow) bool) [][]Flow {
	t.Helper()
	var all [][]Flow
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		fl, err := s.Sample()
		if err != nil {
			t.Fatalf("Sample: %v", err)
		}
		cp := append([]Flow(nil), fl...)
		all = append(all, cp)
		if cond(cp) {
			return all
		}
		time.Sleep(s.Interval())
	}
	return all
}

// prefetchVariants are the walk program's variants this kernel loads
// (tcpiter.Config.Prefetch): both where it takes the touches of the next
// socket, else the one without, after checking that the kernel's refusal
// is expected (a kernel before 6.17, which has no bpf_rdonly_cast of
// untyped memory).
func prefetchVariants(t *testing.T) []tcpiter.Prefetch {
	t.Helper()
	err := tcpiter.ProbePrefetch()
	if err == nil {
		return []tcpiter.Prefetch{tcpiter.PrefetchOn, tcpiter.PrefetchOff}
	}
	if kernelAtLeast(6, 17) {
		t.Fatalf("the walk program with the touches of the next socket does not load on this kernel (6.17+): %v", err)
	}
	t.Logf("the walks run without prefetch on this kernel: %v", err)
	return []tcpiter.Prefetch{tcpiter.PrefetchOff}
}

// kernelAtLeast says whether the running kernel's release is major.minor
// or later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var a, b int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &a, &b)
	return a > major || (a == major && b >= minor)
}

func prefetchName(p tcpiter.Prefetch) string {
	if p == tcpiter.PrefetchOn {
		return "prefetch=on"
	}
	return "prefetch=off"
}
