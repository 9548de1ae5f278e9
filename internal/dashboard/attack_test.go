// attack_test.go: the dashboard's HTTP server against clients that do not
// read and against DNS rebinding. Each test names the defect it guards
// against and the fix.
package dashboard

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/tcpmon"
)

// serveBig starts a dashboard whose snapshot holds flows busy flows of two
// minutes each (~2.4 MB of JSON at 200), served on loopback.
func serveBig(t *testing.T, flows int, cfg Config) (*Server, string) {
	t.Helper()
	smp, err := tcpmon.New(tcpmon.Config{Backend: tcpmon.BackendDiag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smp.Close() })
	cfg.Sampler = smp
	s := New(cfg)
	for i := range flows {
		v := FlowView{Cookie: uint64(i + 1), Src: "10.0.0.1:40000", Dst: "10.0.0.2:443", Lane: "interactive", Cong: "cubic", State: "ESTABLISHED"}
		for k := range 120 {
			v.Points = append(v.Points, Point{T: float64(k), Cwnd: 100, SRTT: 12.5, Rate: 9.75, Recv: 1.25})
		}
		s.flows[v.Cookie] = &series{view: v, seen: time.Now()}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.HTTPServer()
	go func() { _ = hs.Serve(s.Listener(ln)) }()
	t.Cleanup(func() { hs.Close() })
	return s, ln.Addr().String()
}

// TestNonReadingClientsBounded (audit D8): with 5,000 flows, each client that
// asked for /api/snapshot and never read held its own ~2 MB encoding (500
// clients: 43 -> 227 MB; 2,000: 4.32 GB), with no write or idle timeout. Fix:
// one encoding per sample shared by every client, write and idle timeouts, at
// most MaxConns connections open at once, and a new connection takes the slot
// of the one that has moved no bytes for the longest (at 64 slots and a 2 s
// write timeout, a reading client behind 2,000 that do not read waited for
// their timeouts in turn: over 60 s).
func TestNonReadingClientsBounded(t *testing.T) {
	_, addr := serveBig(t, 200, Config{WriteTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// one reading client first: what is made once (the shared encoding,
	// the server's lazily built state; 60 MB in a fresh process, 3.6 MB
	// grown in the next) is in the baseline, not counted as the
	// non-reading clients' growth
	if resp, err := http.Get("http://" + addr + "/api/snapshot"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	before := heap()
	tcpPeak := watchTCPMemory(t)
	const clients = 2000
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	for range clients {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(c, "GET /api/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second) // the served handlers block in their writes
	// the host's TCP memory: the evicted connections' unsent snapshots are
	// freed (reset), not left in orphans (before: past tcp_mem, and the
	// kernel reset other programs' connections)
	peak := tcpPeak()
	t.Logf("the host's TCP memory grew at most %.0f MB (%d slots of at most tcp_wmem's send buffer)", float64(peak)/1e6, DefaultMaxConns)
	if peak > 512<<20 {
		t.Errorf("%d clients that do not read took %.0f MB of the host's TCP memory, want < 512", clients, float64(peak)/1e6)
	}
	// the stalled connections give their slots to new ones: a reading
	// client is served (before, only their write timeouts freed the slots)
	c := http.Client{Timeout: 60 * time.Second}
	began := time.Now()
	resp, err := c.Get("http://" + addr + "/api/snapshot")
	if err != nil {
		t.Fatalf("a reading client behind %d that do not read: %v", clients, err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n < 1<<20 {
		t.Errorf("snapshot: %s, %d bytes", resp.Status, n)
	}
	t.Logf("a reading client behind them served in %v", time.Since(began).Round(time.Millisecond))
	// the heap once every one of them was accepted (the reading client was
	// queued behind them), MaxConns of them in slots: -0.7 to 1.3 MB (a
	// copy of the ~2 MB encoding per stalled client would be 128 MB). Read
	// 1 s after the last dial instead, it counted what the listener's
	// churn through the backlog had in flight: 70.6 MB in one CI run
	grew := int64(heap()) - int64(before)
	t.Logf("%d clients that do not read: heap grew %.1f MB", clients, float64(grew)/1e6)
	if grew > 64<<20 {
		t.Errorf("%d clients that do not read grew the heap by %.1f MB, want < 64", clients, float64(grew)/1e6)
	}
}

// watchTCPMemory samples the host's TCP memory (/proc/net/sockstat's
// mem, pages, every socket of every namespace) every 50 ms until the
// returned function is called, which says its largest growth in bytes.
func watchTCPMemory(t *testing.T) func() int64 {
	t.Helper()
	base, err := tcpMemPages()
	if err != nil {
		t.Fatal(err)
	}
	stop, peak := make(chan struct{}), make(chan int64)
	go func() {
		var most int64
		for {
			select {
			case <-stop:
				peak <- most * int64(os.Getpagesize())
				return
			case <-time.After(50 * time.Millisecond):
			}
			if n, err := tcpMemPages(); err == nil {
				most = max(most, n-base)
			}
		}
	}()
	return func() int64 { close(stop); return <-peak }
}

// tcpMemPages is /proc/net/sockstat's TCP mem.
func tcpMemPages() (int64, error) {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TCP:" {
			continue
		}
		for i := 1; i+1 < len(f); i += 2 {
			if f[i] == "mem" {
				return strconv.ParseInt(f[i+1], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("/proc/net/sockstat: no TCP mem")
}

// TestDNSRebindingRefused (audit D9): `curl -H 'Host: attacker.example'` got
// every flow's PID and process name, so a web page that rebinds its name to
// 127.0.0.1 could read them. Fix: a Host that is not an address, localhost or
// a name the user listens on is refused.
func TestDNSRebindingRefused(t *testing.T) {
	_, addr := serveBig(t, 1, Config{Hosts: []string{"dash.lan"}})
	for host, want := range map[string]int{
		"attacker.example": http.StatusMisdirectedRequest, "attacker.example:8377": http.StatusMisdirectedRequest,
		addr: http.StatusOK, "localhost:8377": http.StatusOK, "[::1]:8377": http.StatusOK, "dash.lan:8377": http.StatusOK,
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/snapshot", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %s, want %d", host, resp.Status, want)
		}
	}
}
