// events_test.go: event mode against a real short connection in a fresh
// namespace: start and end events for both ends with the flow's duration,
// and per-ACK probe events carrying the sender's cwnd.
package tcpmon

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/lanes-net/lanes/internal/bpf/tcpevents"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestEventLayout(t *testing.T) {
	// decodeRawEvent hard-codes the offsets of struct event.
	if sizeofEvent != 128 {
		t.Fatalf("struct event is %d bytes, decodeRawEvent expects 128", sizeofEvent)
	}
	var e tcpevents.Event
	if off := unsafe.Offsetof(e.Comm); off != 112 {
		t.Errorf("comm at %d, want 112", off)
	}
	if off := unsafe.Offsetof(e.SndCwnd); off != 76 {
		t.Errorf("snd_cwnd at %d, want 76", off)
	}
}

func TestEventsShortConnection(t *testing.T) {
	for _, batch := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run("batch="+batch.String(), func(t *testing.T) { testEventsShortConnection(t, batch) })
	}
}

func testEventsShortConnection(t *testing.T, batch time.Duration) {
	p := testutil.NewVethPair(t)
	srv := newSink(t, p.B, net.JoinHostPort(p.AddrB.String(), "0"))
	tr, err := OpenTracer(EventConfig{Probe: true, State: true, Ports: []uint16{srv.port()}, MaxDelay: batch})
	if err != nil {
		t.Skipf("event mode unavailable: %v", err)
	}
	defer tr.Close()

	const hold = 100 * time.Millisecond
	c := dialIn(t, p.A, net.JoinHostPort(p.AddrB.String(), strconv.Itoa(int(srv.port()))))
	client := c.LocalAddr().String()
	began := time.Now()
	c.Write(make([]byte, 200<<10))
	time.Sleep(hold)
	c.Close()
	lifetime := time.Since(began)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var starts, ends, probes []Event
	for ctx.Err() == nil && (len(ends) < 2 || len(starts) < 2) {
		ev, err := tr.Next(ctx)
		if err != nil {
			break
		}
		if ev.Src != client && ev.Dst != client {
			continue // another test's traffic on the same port number
		}
		switch ev.Kind {
		case "start":
			starts = append(starts, ev)
		case "end":
			ends = append(ends, ev)
		case "probe":
			probes = append(probes, ev)
		}
	}
	t.Logf("%d start, %d end, %d probe events; stats %+v", len(starts), len(ends), len(probes), tr.Stats())
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("want 2 start and 2 end events (both ends), got %+v / %+v", starts, ends)
	}
	var active *Event
	for i := range starts {
		if starts[i].Src == client {
			active = &starts[i]
		}
	}
	if active == nil || active.OldState != "SYN-SENT" || active.PID != uint32(os.Getpid()) {
		t.Errorf("client start event %+v, want SYN-SENT->ESTAB from pid %d", active, os.Getpid())
	}
	for _, e := range ends {
		if e.NewState != "CLOSE" {
			t.Errorf("end event to %s, want CLOSE", e.NewState)
		}
		// The flow lived at least as long as we held it open, and not
		// much longer than we watched (closing takes a FIN round trip).
		if e.Duration < hold || e.Duration > lifetime+2*time.Second {
			t.Errorf("end event duration %v, want %v..%v", e.Duration, hold, lifetime+2*time.Second)
		}
		if d := time.Since(e.Time); d < 0 || d > 10*time.Second {
			t.Errorf("event time %v is %v from now", e.Time, d)
		}
	}
	if len(probes) == 0 {
		t.Fatal("no probe events for a 200 KB transfer")
	}
	for _, e := range probes {
		if e.Src == client && (e.Cwnd == 0 || e.SRTT == 0) {
			t.Errorf("sender probe event without cwnd/srtt: %+v", e)
			break
		}
	}
}
