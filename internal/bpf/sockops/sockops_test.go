// sockops_test.go checks that the sock_ops program passes the verifier and
// its CO-RE relocations (struct sock cgroup and uid) resolve on this kernel,
// sharing the classifier's maps. Its behaviour on real sockets is tested in
// the datapath integration tests.
package sockops

import (
	"testing"

	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestLoadWithSharedMaps(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	cls, err := classifier.Load(classifier.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cls.Close()
	objs, err := Load(Config{NetnsCookie: 1, NetnsInode: 1, NotsentLowat: 16384, CCName: "lanes_test"}, cls.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	// The maps are really shared: what sock_ops would write, the classifier reads.
	ci, err := cls.LanesCookie.Info()
	if err != nil {
		t.Fatal(err)
	}
	si, err := objs.LanesCookie.Info()
	if err != nil {
		t.Fatal(err)
	}
	cid, _ := ci.ID()
	sid, _ := si.ID()
	if cid != sid {
		t.Fatalf("cookie map not shared: classifier id %d, sockops id %d", cid, sid)
	}
	c, err := ReadCounters(objs.LanesOpsStats)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != len(CounterNames) {
		t.Fatalf("got %d counters", len(c))
	}
}

// TestSockCapLeftoversCannotFillTheMap: caps written for sockets that have
// closed (never deleted) must not make the map refuse the caps of new
// sockets once it holds max_entries.
func TestSockCapLeftoversCannotFillTheMap(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	cls, err := classifier.Load(classifier.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cls.Close()
	objs, err := Load(Config{NetnsCookie: 1, NetnsInode: 1}, cls.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	n := objs.LanesSockCap.MaxEntries()
	for c := uint64(1); c <= uint64(n)+100; c++ {
		if err := objs.LanesSockCap.Put(c, uint32(10)); err != nil {
			t.Fatalf("cap of socket %d with %d leftovers in a %d-entry map: %v", c, c-1, n, err)
		}
	}
	var v uint32
	if err := objs.LanesSockCap.Lookup(uint64(n)+100, &v); err != nil || v != 10 {
		t.Fatalf("newest cap: %d %v", v, err)
	}
}
