// tracker_test.go: the tracked mode reports every socket on its full walk,
// then only what changed: a new connection, data moved, a close (GONE from
// the walk or the ring), and nothing for idle sockets.
package tcpiter

import (
	"errors"
	"io"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestTrackerReportsChanges(t *testing.T) {
	testutil.RequireRoot(t)
	b := newTrackerBed(t)
	c1, s1 := b.dial()
	full, _ := b.walk(b.tr.OpenFull)
	if len(full) != 2 {
		t.Fatalf("full walk: %d sockets, want 2", len(full))
	}
	if d, g := b.walk(b.tr.OpenDelta); len(d) != 0 || len(g) != 0 {
		t.Fatalf("delta of idle sockets: %d records, %d gone; want none", len(d), len(g))
	}
	c2, _ := b.dial() // tracked from its first state change on
	d2, _ := b.walk(b.tr.OpenDelta)
	if len(d2) != 2 {
		t.Fatalf("delta after a new connection: %d records, want its 2 sockets", len(d2))
	}
	var cookie2 uint64
	for ck, x := range d2 {
		if x.Sport == uint16(c2.LocalAddr().(*net.TCPAddr).Port) {
			cookie2 = ck
		}
	}
	b.checkOnlyChanged(c1, s1)
	b.checkColdWakes(c1, s1)
	// c2's client goes to FIN-WAIT, its server end to CLOSE-WAIT (not
	// reported): GONE for both, by the ring or the walk, nothing else.
	c2.Close()
	gone := map[uint64]bool{}
	for try := 0; !gone[cookie2]; try++ {
		_, g := b.walk(b.tr.OpenDelta)
		for _, ck := range g {
			if _, ok := d2[ck]; !ok || gone[ck] {
				t.Fatalf("gone %d: not one of c2's sockets %v, or twice", ck, d2)
			}
			gone[ck] = true
		}
		if try == 50 {
			t.Fatalf("no GONE for the closed client %d", cookie2)
		}
	}
}

// trackerBed is a namespace with a tracker loaded for its established
// sockets and a listener its connections dial.
type trackerBed struct {
	t  *testing.T
	ns *testutil.NetNS
	tr *Tracker
	rd Reader
	ln net.Listener
}

func newTrackerBed(t *testing.T) *trackerBed {
	ns := testutil.NewNetNS(t)
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Handle), &st); err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTracker(Config{States: 1 << 1}, uint32(st.Ino)) // ESTABLISHED
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks a feature of the TCP iterator: %v", err)
	}
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return &trackerBed{t: t, ns: ns, tr: tr}
}

// walk reads one walk (open: the tracker's full or delta walk) and the
// ring's GONE records: the sockets reported, by cookie, and those gone.
func (b *trackerBed) walk(open func() (io.ReadCloser, error)) (socks map[uint64]Rec, gone []uint64) {
	socks = map[uint64]Rec{}
	b.ns.Do(b.t, func() error {
		r, err := open()
		if err != nil {
			return err
		}
		defer r.Close()
		return b.rd.Each(r, func(x *Rec) {
			if x.Kind == RecGone {
				gone = append(gone, x.Cookie)
			} else {
				socks[x.Cookie] = *x
			}
		})
	})
	if _, err := b.tr.Gone(func(c uint64) { gone = append(gone, c) }); err != nil {
		b.t.Fatal(err)
	}
	return socks, gone
}

// dial opens a connection in the namespace: the client end and the server's.
func (b *trackerBed) dial() (c, s net.Conn) {
	b.ns.Do(b.t, func() error {
		var err error
		if b.ln == nil {
			if b.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return err
			}
			b.t.Cleanup(func() { b.ln.Close() })
		}
		c, s, err = testutil.Connect(b.t, b.ln)
		return err
	})
	return c, s
}

// checkOnlyChanged sends 1000 bytes over c1: the deltas report both its
// ends (bytes sent, acked, received) and no other socket, then settle.
func (b *trackerBed) checkOnlyChanged(c1, s1 net.Conn) {
	t := b.t
	if _, err := c1.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s1, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	port := uint16(c1.LocalAddr().(*net.TCPAddr).Port)
	for try := 0; ; try++ {
		d, _ := b.walk(b.tr.OpenDelta)
		if len(d) == 0 && try > 0 {
			break // the ACK had not come back in the first walk
		}
		if try == 50 {
			t.Fatalf("delta never settled: %d records", len(d))
		}
		for _, x := range d {
			if x.Sport != port && x.Dport != port {
				t.Errorf("record of a socket that did not change: %+v", x)
			}
		}
	}
}

// checkColdWakes: idle for 10 walks, c1 is in the cold maps, looked at every
// ColdMaps-th walk; new activity on it shows within ColdMaps walks.
func (b *trackerBed) checkColdWakes(c1, s1 net.Conn) {
	t := b.t
	for range 10 + ColdMaps {
		if d, g := b.walk(b.tr.OpenDelta); len(d) != 0 || len(g) != 0 {
			t.Fatalf("idle sockets: %d records, %d gone", len(d), len(g))
		}
	}
	if _, err := s1.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c1, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for range ColdMaps {
		d, _ := b.walk(b.tr.OpenDelta)
		seen += len(d)
	}
	if seen == 0 {
		t.Fatalf("activity on a cold socket not reported within %d walks", ColdMaps)
	}
}
