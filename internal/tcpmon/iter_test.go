// iter_test.go: the BPF iterator backend and sock_diag report the same
// fields for the same sockets.
package tcpmon

import (
	"cmp"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestBackendsAgree samples idle connections that have moved data (so
// counters, RTTs, rates and busy times are not zero) with the three
// backends and compares every field of every flow but the sample time.
// The tracked sampler is opened before the connections exist, so what it
// reports came from its change walks (the hook saw the sockets appear),
// not from its first full walk.
func TestBackendsAgree(t *testing.T) {
	testutil.RequireRoot(t)
	requireTracker(t)
	ns := testutil.NewNetNS(t)
	tk, err := New(Config{NetNS: ns.Handle, Backend: BackendTrack})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if fl, err := tk.Sample(); err != nil || len(fl) != 0 {
		t.Fatalf("tracked sampler, empty namespace: %d flows, %v", len(fl), err)
	}
	var conns []net.Conn
	ns.Do(t, func() error {
		for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			for range 5 {
				c, s, err := testutil.Connect(t, ln)
				if err != nil {
					return err
				}
				conns = append(conns, c, s)
				go io.Copy(io.Discard, s)
				if _, err := c.Write(make([]byte, 256<<10)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	sample := func(backend string, p tcpiter.Prefetch) []Flow {
		s, err := New(Config{NetNS: ns.Handle, Backend: backend, prefetch: p})
		if err != nil {
			t.Fatalf("%s: %v", backend, err)
		}
		defer s.Close()
		if name, why := s.Backend(); name != backend {
			t.Fatalf("backend %s, want %s (%s)", name, backend, why)
		}
		fl, err := s.Sample()
		if err != nil {
			t.Fatalf("%s: %v", backend, err)
		}
		return canonFlows(fl)
	}
	// The tracked sampler after trackIdleEvery+1 samples: a socket that
	// has been idle is looked at in one of any trackIdleEvery consecutive
	// samples, so everything that changed before is in, and the last
	// sample saw no change: zero rates, as in the other backends' first
	// sample.
	tracked := func() []Flow {
		var fl []Flow
		for range trackIdleEvery + 1 {
			if fl, err = tk.Sample(); err != nil {
				t.Fatalf("%s: %v", BackendTrack, err)
			}
		}
		return canonFlows(fl)
	}
	// Compare only while nothing moves: sock_diag before and after the
	// iterator must agree with each other (the data has been read and
	// acked); on a loaded machine that can take a while.
	// The iterator with each variant of its walk program this kernel
	// loads (the touches of the next socket only warm caches).
	variants := prefetchVariants(t)
	var d, tr []Flow
	its := make([][]Flow, len(variants))
	for try := 0; ; try++ {
		before := sample(BackendDiag, tcpiter.PrefetchAuto)
		for i, p := range variants {
			its[i] = sample(BackendIter, p)
		}
		tr = tracked()
		d = sample(BackendDiag, tcpiter.PrefetchAuto)
		if reflect.DeepEqual(before, d) {
			break
		}
		if try == 100 {
			t.Fatal("the connections never went idle")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for v, it := range its {
		if len(it) != len(d) {
			t.Fatalf("sock_diag %d flows, iterator (%s) %d", len(d), prefetchName(variants[v]), len(it))
		}
		for i := range d {
			if !reflect.DeepEqual(d[i], it[i]) {
				t.Errorf("flow %s differs:\nsock_diag %+v\niterator (%s) %+v", d[i].Key(), d[i], prefetchName(variants[v]), it[i])
			}
		}
	}
	if len(d) != len(conns) || len(tr) != len(d) {
		t.Fatalf("sock_diag %d flows, tracked %d, want %d", len(d), len(tr), len(conns))
	}
	senders := 0
	for i := range d {
		if !reflect.DeepEqual(d[i], tr[i]) {
			t.Errorf("flow %s differs:\nsock_diag %+v\ntracked   %+v", d[i].Key(), d[i], tr[i])
		}
		if d[i].BytesAcked > 0 && d[i].SRTT > 0 && d[i].DeliveryRate > 0 {
			senders++
		}
	}
	if senders != len(conns)/2 {
		t.Errorf("%d senders with acked bytes, RTT and delivery rate, want %d: the comparison proves little", senders, len(conns)/2)
	}
}

// canonFlows is a sample sorted by cookie with the sampling time cleared,
// so that two samples of the same sockets compare equal.
func canonFlows(fl []Flow) []Flow {
	out := slices.Clone(fl)
	slices.SortFunc(out, func(a, b Flow) int { return cmp.Compare(a.Cookie, b.Cookie) })
	for i := range out {
		out[i].Time = time.Time{}
	}
	return out
}
