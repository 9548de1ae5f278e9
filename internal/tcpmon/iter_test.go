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
	conns := busyConns(t, ns)
	sample := func(backend string, p tcpiter.Prefetch) []Flow { return sampleOnce(t, ns, backend, p) }
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
		compareFlows(t, d, it, "iterator ("+prefetchName(variants[v])+")")
	}
	compareFlows(t, d, tr, "tracked")
	if len(d) != conns {
		t.Fatalf("sock_diag %d flows, want %d", len(d), conns)
	}
	senders := 0
	for i := range d {
		if d[i].BytesAcked > 0 && d[i].SRTT > 0 && d[i].DeliveryRate > 0 {
			senders++
		}
	}
	if senders != conns/2 {
		t.Errorf("%d senders with acked bytes, RTT and delivery rate, want %d: the comparison proves little", senders, conns/2)
	}
}

// busyConns opens 5 IPv4 and 5 IPv6 loopback connections in ns and sends
// 256 KB over each (so counters, RTTs, rates and busy times are not zero);
// it returns the number of sockets.
func busyConns(t *testing.T, ns *testutil.NetNS) int {
	t.Helper()
	n := 0
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
				n += 2
				go io.Copy(io.Discard, s)
				if _, err := c.Write(make([]byte, 256<<10)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return n
}

// sampleOnce takes one sample of ns with a new sampler on the backend (and
// the iterator's walk program variant p), canonical.
func sampleOnce(t *testing.T, ns *testutil.NetNS, backend string, p tcpiter.Prefetch) []Flow {
	t.Helper()
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

// compareFlows reports every flow of got (named what) that differs from
// sock_diag's in want.
func compareFlows(t *testing.T, want, got []Flow, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("sock_diag %d flows, %s %d", len(want), what, len(got))
	}
	for i := range want {
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Errorf("flow %s differs:\nsock_diag %+v\n%s %+v", want[i].Key(), want[i], what, got[i])
		}
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
