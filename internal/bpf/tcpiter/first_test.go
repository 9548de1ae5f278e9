// first_test.go: the first walk written into the mapped slots (ReadFirst)
// gives the same sockets as a walk read from the stream, with the slots
// short (the rest through the stream, none twice) or ample (nothing
// through the stream), again on a second walk, and OpenFirst fails once
// FreeFirst freed them.
package tcpiter

import (
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// counting counts the bytes read through it.
type counting struct {
	r io.Reader
	n int
}

func (c *counting) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.n += k
	return k, err
}

func TestFirstSlots(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Handle), &st); err != nil {
		t.Fatal(err)
	}
	const conns = 8 // 16 established sockets
	ns.Do(t, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		for range conns {
			if _, _, err := testutil.Connect(t, ln); err != nil {
				return err
			}
		}
		return nil
	})
	for _, slots := range []int{5, 100} {
		tr, err := LoadTracker(Config{States: 1 << 1, FirstSlots: slots}, uint32(st.Ino))
		if errors.Is(err, ebpf.ErrNotSupported) {
			t.Skipf("kernel lacks a feature of the TCP iterator: %v", err)
		}
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		t.Cleanup(func() { tr.Close() })
		want := streamWalk(t, ns, tr)
		if len(want) != 2*conns {
			t.Fatalf("stream walk: %d sockets, want %d", len(want), 2*conns)
		}
		for walk := range 2 {
			got, streamed := firstWalk(t, ns, tr)
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
				t.Fatalf("%d slots, walk %d: sockets %v, want %v", slots, walk, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for ck, x := range got {
				if w := want[ck]; x.Sport != w.Sport || x.Dport != w.Dport || x.Ino != w.Ino || x.State != w.State {
					t.Errorf("%d slots: socket %d: %+v, stream walk %+v", slots, ck, x, w)
				}
			}
			if wantStreamed := max(0, 2*conns-slots); streamed != wantStreamed {
				t.Errorf("%d slots, walk %d: %d records through the stream, want %d", slots, walk, streamed, wantStreamed)
			}
		}
		if err := tr.FreeFirst(); err != nil {
			t.Fatal(err)
		}
		if r, err := tr.OpenFirst(); err == nil {
			r.Close()
			t.Fatal("OpenFirst after FreeFirst: no error")
		}
	}
}

// streamWalk reads an OpenFull walk: the records by cookie.
func streamWalk(t *testing.T, ns *testutil.NetNS, tr *Tracker) map[uint64]Rec {
	recs := map[uint64]Rec{}
	ns.Do(t, func() error {
		r, err := tr.OpenFull()
		if err != nil {
			return err
		}
		defer r.Close()
		var rd Reader
		return rd.Each(r, func(x *Rec) { recs[x.Cookie] = *x })
	})
	return recs
}

// firstWalk reads an OpenFirst walk with ReadFirst: the records by cookie
// (a cookie twice fails the test) and how many came through the stream.
func firstWalk(t *testing.T, ns *testutil.NetNS, tr *Tracker) (map[uint64]Rec, int) {
	recs := map[uint64]Rec{}
	var c counting
	ns.Do(t, func() error {
		r, err := tr.OpenFirst()
		if err != nil {
			return err
		}
		defer r.Close()
		c.r = r
		a, err := tr.ReadFirst(&c)
		if err != nil {
			return err
		}
		defer a.Close()
		return a.Each(func(x *Rec) {
			if _, ok := recs[x.Cookie]; ok {
				t.Errorf("socket %d twice", x.Cookie)
			}
			recs[x.Cookie] = *x
		})
	})
	return recs, c.n / RecSize
}
