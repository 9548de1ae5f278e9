// tcpiter_test.go: the iterator loads on this kernel and reports the
// sockets of the namespace it is opened in, and only those.
package tcpiter

import (
	"errors"
	"net"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestRecordLayout(t *testing.T) {
	if RecSize%8 != 0 {
		t.Fatalf("record size %d is not a multiple of 8: records in the stream would be misaligned", RecSize)
	}
	if unsafe.Sizeof(Rec{}) != uintptr(RecSize) {
		t.Fatal("RecSize differs from the Go struct")
	}
}

func TestIterSeesNamespaceSockets(t *testing.T) {
	testutil.RequireRoot(t)
	it, err := Load(Config{States: 1 << 1}) // ESTABLISHED
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks a feature of the TCP iterator: %v", err)
	}
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { it.Close() })
	ns := testutil.NewNetNS(t)
	var ports map[uint16]bool
	var got []Rec
	ns.Do(t, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		c, _, err := testutil.Connect(t, ln)
		if err != nil {
			return err
		}
		ports = map[uint16]bool{uint16(c.LocalAddr().(*net.TCPAddr).Port): true, uint16(ln.Addr().(*net.TCPAddr).Port): true}
		r, err := it.Open()
		if err != nil {
			return err
		}
		defer r.Close()
		var rd Reader
		return rd.Each(r, func(x *Rec) { got = append(got, *x) })
	})
	if len(got) != 2 {
		t.Fatalf("%d records, want the 2 established sockets of the namespace: %+v", len(got), got)
	}
	for _, x := range got {
		if !ports[x.Sport] || !ports[x.Dport] || x.Cookie == 0 || x.SndCwnd == 0 || x.Ino == 0 || x.State != 1 {
			t.Errorf("record %+v: want ports %v, a cookie, cwnd, inode, ESTABLISHED", x, ports)
		}
	}
}

// TestPrefetchChoice: the default load (PrefetchAuto) runs the walk
// program with the touches of the next socket exactly where the kernel
// takes it (ProbePrefetch), in both the iterator and the tracker, and
// PrefetchOff always runs the one without.
func TestPrefetchChoice(t *testing.T) {
	testutil.RequireRoot(t)
	if err := Probe(); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks a feature of the TCP iterator: %v", err)
	}
	want := ProbePrefetch() == nil
	for _, c := range []struct {
		p    Prefetch
		want bool
	}{{PrefetchAuto, want}, {PrefetchOff, false}} {
		it, err := Load(Config{States: 1 << 1, Prefetch: c.p})
		if err != nil {
			t.Fatalf("load (prefetch %d): %v", c.p, err)
		}
		got := it.Prefetching()
		it.Close()
		if got != c.want {
			t.Errorf("iterator (prefetch %d): prefetching %v, want %v", c.p, got, c.want)
		}
		tr, err := LoadTracker(Config{States: 1 << 1, Prefetch: c.p}, 1)
		if errors.Is(err, ebpf.ErrNotSupported) {
			continue // no tracked mode here
		}
		if err != nil {
			t.Fatalf("load tracker (prefetch %d): %v", c.p, err)
		}
		got = tr.Prefetching()
		tr.Close()
		if got != c.want {
			t.Errorf("tracker (prefetch %d): prefetching %v, want %v", c.p, got, c.want)
		}
	}
}
