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
	var rd Reader
	walk := func(open func() (io.ReadCloser, error)) (socks map[uint64]Rec, gone []uint64) {
		socks = map[uint64]Rec{}
		ns.Do(t, func() error {
			r, err := open()
			if err != nil {
				return err
			}
			defer r.Close()
			return rd.Each(r, func(x *Rec) {
				if x.Kind == RecGone {
					gone = append(gone, x.Cookie)
				} else {
					socks[x.Cookie] = *x
				}
			})
		})
		if _, err := tr.Gone(func(c uint64) { gone = append(gone, c) }); err != nil {
			t.Fatal(err)
		}
		return socks, gone
	}
	delta := tr.OpenDelta
	var ln net.Listener
	dial := func() (c, s net.Conn) {
		ns.Do(t, func() error {
			var err error
			if ln == nil {
				if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					return err
				}
				t.Cleanup(func() { ln.Close() })
			}
			if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
				return err
			}
			s, err = ln.Accept()
			return err
		})
		t.Cleanup(func() { c.Close(); s.Close() })
		return c, s
	}
	c1, s1 := dial()
	full, _ := walk(tr.OpenFull)
	if len(full) != 2 {
		t.Fatalf("full walk: %d sockets, want 2", len(full))
	}
	if d, g := walk(delta); len(d) != 0 || len(g) != 0 {
		t.Fatalf("delta of idle sockets: %d records, %d gone; want none", len(d), len(g))
	}
	c2, _ := dial() // tracked from its first state change on
	d, _ := walk(delta)
	if len(d) != 2 {
		t.Fatalf("delta after a new connection: %d records, want its 2 sockets", len(d))
	}
	var cookie2 uint64
	d2 := d
	for ck, x := range d {
		if x.Sport == uint16(c2.LocalAddr().(*net.TCPAddr).Port) {
			cookie2 = ck
		}
	}
	if _, err := c1.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(s1, buf); err != nil {
		t.Fatal(err)
	}
	// Both ends of c1 changed (bytes sent, acked, received).
	for try := 0; ; try++ {
		d, _ = walk(delta)
		if len(d) == 0 && try > 0 {
			break // the ACK had not come back in the first walk
		}
		if try == 50 {
			t.Fatalf("delta never settled: %d records", len(d))
		}
		for _, x := range d {
			if x.Sport != uint16(c1.LocalAddr().(*net.TCPAddr).Port) && x.Dport != uint16(c1.LocalAddr().(*net.TCPAddr).Port) {
				t.Errorf("record of a socket that did not change: %+v", x)
			}
		}
	}
	// Idle for 10 walks: in the cold maps, looked at every ColdMaps-th
	// walk. New activity shows within ColdMaps walks; a close (below) at
	// once.
	for range 10 + ColdMaps {
		if d, g := walk(delta); len(d) != 0 || len(g) != 0 {
			t.Fatalf("idle sockets: %d records, %d gone", len(d), len(g))
		}
	}
	if _, err := s1.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c1, buf[:100]); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for range ColdMaps {
		d, _ := walk(delta)
		seen += len(d)
	}
	if seen == 0 {
		t.Fatalf("activity on a cold socket not reported within %d walks", ColdMaps)
	}
	// c2's client goes to FIN-WAIT, its server end to CLOSE-WAIT (not
	// reported): GONE for both, by the ring or the walk, nothing else.
	c2.Close()
	gone := map[uint64]bool{}
	for try := 0; !gone[cookie2]; try++ {
		_, g := walk(delta)
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
