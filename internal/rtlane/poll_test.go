// poll_test.go: the anticipatory poller (poll.go): when it polls, and that
// it reads every request, in order, whether it polls or blocks.
package rtlane

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func seqpacketPair(t testing.TB) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

func TestPollerSteady(t *testing.T) {
	const ms = int64(time.Millisecond)
	feed := func(p *poller, ts ...int64) {
		for _, x := range ts {
			p.arrived(x)
		}
	}
	p := newPoller(50, &pollCounters{}, -1, false) // W = 50 µs
	feed(p, 1000*ms, 1001*ms, 1002*ms, 1003*ms)
	if p.steady() {
		t.Fatal("steady after 2 regular gaps")
	}
	feed(p, 1004*ms+90_000) // 90 µs late: still a regular gap
	if !p.steady() || p.period < ms || p.period > ms+20_000 {
		t.Fatalf("1 ms period not steady: period %d regular %d", p.period, p.regular)
	}
	if g := p.grid - 1004*ms; g < 0 || g > 90_000/4 {
		t.Errorf("grid at +%d ns: a request 90 µs late should move it by a small part of that", g)
	}
	feed(p, 1005*ms) // early against the grid: the grid takes it
	if p.grid != 1005*ms {
		t.Errorf("grid %d after an early request, want it", p.grid-1000*ms)
	}
	feed(p, 1007*ms) // a skipped period: start over
	if p.steady() || p.period != 2*ms {
		t.Errorf("after a 2 ms gap: steady %v period %d", p.steady(), p.period)
	}
	short := newPoller(200, &pollCounters{}, -1, false) // period 1 ms < 10 W
	feed(short, 1000*ms, 1001*ms, 1002*ms, 1003*ms, 1004*ms, 1005*ms)
	if short.steady() {
		t.Error("polls for a period shorter than pollMinPeriod windows")
	}
	off := newPoller(0, &pollCounters{}, -1, false)
	feed(off, 1000*ms, 1001*ms, 1002*ms, 1003*ms, 1004*ms, 1005*ms)
	if off.steady() {
		t.Error("polls with poll_window_us 0")
	}
}

// TestPollerHitMissEarly drives anticipate through its three outcomes.
func TestPollerHitMissEarly(t *testing.T) {
	cl, sv := seqpacketPair(t)
	var ctr pollCounters
	p := newPoller(100, &ctr, sv, false)
	buf := make([]byte, 64)
	const ms = int64(time.Millisecond)

	// Window open now, request waiting: read while polling.
	p.grid, p.period = Monotonic()-ms, ms
	if err := unix.Sendmsg(cl, []byte("one"), nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	if n, _, err, got := p.anticipate(sv, buf); !got || err != nil || string(buf[:n]) != "one" {
		t.Fatalf("hit: got %v n %d err %v", got, n, err)
	}
	// Window open now, nothing comes: a miss after at most 2 W; the
	// last of pollMaxMisses in a row turns polling off.
	for i := 1; i <= pollMaxMisses; i++ {
		p.grid, p.regular = Monotonic()-ms, pollRegular
		if _, _, _, got := p.anticipate(sv, buf); got {
			t.Fatal("read something from an empty socket")
		}
		if off := p.regular == 0; off != (i == pollMaxMisses) {
			t.Fatalf("after %d misses polling off: %v", i, off)
		}
	}
	// Window opens in 50 ms, request already there: read at once (early).
	p.grid = Monotonic() + 50*ms - ms
	if err := unix.Sendmsg(cl, []byte("two"), nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	if n, _, err, got := p.anticipate(sv, buf); !got || err != nil || string(buf[:n]) != "two" {
		t.Fatalf("early: got %v n %d err %v", got, n, err)
	}
	if h, m, e := ctr.hits.Load(), ctr.misses.Load(), ctr.early.Load(); h != 1 || m != pollMaxMisses || e != 1 {
		t.Errorf("hits %d misses %d early %d, want 1, %d, 1", h, m, e, pollMaxMisses)
	}
}

// TestPollerReadsEverything: a periodic writer, then a burst, then
// hang-up; recv returns every message in order, then end of stream, with
// the blocking read through the runtime and as a raw system call.
func TestPollerReadsEverything(t *testing.T) {
	for _, raw := range []bool{false, true} {
		cl, sv := seqpacketPair(t)
		if raw {
			if err := setRawReadBound(sv); err != nil {
				t.Fatal(err)
			}
		}
		var ctr pollCounters
		p := newPoller(100, &ctr, sv, raw)
		const n = 60
		go func() {
			for i := 0; i < n; i++ {
				if i < 40 {
					time.Sleep(2 * time.Millisecond)
				}
				_ = unix.Sendmsg(cl, []byte{byte(i)}, nil, nil, 0)
			}
			_ = unix.Shutdown(cl, unix.SHUT_WR)
		}()
		buf := make([]byte, 64)
		for i := 0; i < n; i++ {
			k, _, err := p.recv(sv, buf)
			if err != nil || k != 1 || buf[0] != byte(i) {
				t.Fatalf("raw %v, message %d: n %d err %v first byte %d", raw, i, k, err, buf[0])
			}
		}
		if k, _, err := p.recv(sv, buf); k != 0 || err != nil {
			t.Fatalf("raw %v, after hang-up: n %d err %v, want end of stream", raw, k, err)
		}
		t.Logf("raw %v: hits %d early %d misses %d, %d µs polling", raw, ctr.hits.Load(), ctr.early.Load(), ctr.misses.Load(), ctr.spinNs.Load()/1000)
	}
}
