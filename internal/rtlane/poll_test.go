// poll_test.go: the anticipatory poller (poll.go): when it polls, and that
// it reads every request, in order, whether it polls or blocks.
package rtlane

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func seqpacketPair(t *testing.T) (a, b int) {
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
	p := newPoller(50, &pollCounters{}, -1) // W = 50 µs
	for i := int64(0); i < 3; i++ {
		p.arrived(1000*ms + i*ms)
	}
	if !p.steady() {
		t.Fatalf("1 ms period with W 50 µs not steady: gap %d prev %d", p.gap, p.prevGap)
	}
	p.arrived(p.last + ms + 30_000) // off by 30 µs > W/2
	if p.steady() {
		t.Error("gaps 30 µs apart taken as steady")
	}
	p.arrived(p.last + ms + 30_000)
	if !p.steady() {
		t.Error("equal gaps again not steady")
	}
	p.misses = pollMaxMisses
	if p.steady() {
		t.Error("still polling after pollMaxMisses missed windows")
	}
	p.arrived(p.last + ms + 30_000) // steady again: polling resumes
	if !p.steady() {
		t.Error("polling did not resume on a steady period")
	}
	short := newPoller(200, &pollCounters{}, -1) // period 1 ms < 10 W
	for i := int64(0); i < 3; i++ {
		short.arrived(1000*ms + i*ms)
	}
	if short.steady() {
		t.Error("polls for a period shorter than pollMinPeriod windows")
	}
	off := newPoller(0, &pollCounters{}, -1)
	for i := int64(0); i < 3; i++ {
		off.arrived(1000*ms + i*ms)
	}
	if off.steady() {
		t.Error("polls with poll_window_us 0")
	}
}

// TestPollerHitMissEarly drives anticipate through its three outcomes.
func TestPollerHitMissEarly(t *testing.T) {
	cl, sv := seqpacketPair(t)
	var ctr pollCounters
	p := newPoller(100, &ctr, sv)
	buf := make([]byte, 64)
	const ms = int64(time.Millisecond)

	// Window open now, request waiting: read while polling.
	p.last, p.gap, p.prevGap = Monotonic()-ms, ms, ms
	if err := unix.Sendmsg(cl, []byte("one"), nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	if n, _, err, got := p.anticipate(sv, buf); !got || err != nil || string(buf[:n]) != "one" {
		t.Fatalf("hit: got %v n %d err %v", got, n, err)
	}
	// Window open now, nothing comes: a miss after at most 2 W.
	p.last = Monotonic() - ms
	if _, _, _, got := p.anticipate(sv, buf); got {
		t.Fatal("read something from an empty socket")
	}
	// Window opens in 50 ms, request already there: read at once (early).
	p.last = Monotonic() + 50*ms - ms
	if err := unix.Sendmsg(cl, []byte("two"), nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	if n, _, err, got := p.anticipate(sv, buf); !got || err != nil || string(buf[:n]) != "two" {
		t.Fatalf("early: got %v n %d err %v", got, n, err)
	}
	if h, m, e := ctr.hits.Load(), ctr.misses.Load(), ctr.early.Load(); h != 1 || m != 1 || e != 1 {
		t.Errorf("hits %d misses %d early %d, want 1 each", h, m, e)
	}
}

// TestPollerReadsEverything: a periodic writer, then a burst, then
// hang-up; recv returns every message in order, then end of stream.
func TestPollerReadsEverything(t *testing.T) {
	cl, sv := seqpacketPair(t)
	var ctr pollCounters
	p := newPoller(100, &ctr, sv)
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
			t.Fatalf("message %d: n %d err %v first byte %d", i, k, err, buf[0])
		}
	}
	if k, _, err := p.recv(sv, buf); k != 0 || err != nil {
		t.Fatalf("after hang-up: n %d err %v, want end of stream", k, err)
	}
	t.Logf("hits %d early %d misses %d, %d µs polling", ctr.hits.Load(), ctr.early.Load(), ctr.misses.Load(), ctr.spinNs.Load()/1000)
}
