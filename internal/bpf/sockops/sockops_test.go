// sockops_test.go checks that the sock_ops program passes the verifier and
// its CO-RE relocations (struct sock cgroup and uid) resolve on this kernel,
// sharing the classifier's maps. Its behaviour on real sockets is tested in
// the datapath integration tests. TestVerifierCost bounds what each
// program costs the verifier, so that an older kernel's still takes it.
package sockops

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestLoadWithSharedMaps(t *testing.T) {
	objs, cls := loadWithClassifier(t, Config{NetnsCookie: 1, NetnsInode: 1, NotsentLowat: 16384, CCName: "lanes_test"})
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
	objs, _ := loadWithClassifier(t, Config{NetnsCookie: 1, NetnsInode: 1})
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

// TestVerifierCost: each program, loaded with every option on, costs this
// kernel's verifier at most a tenth of its 1,000,000-instruction limit.
// Older verifiers prune less: lanes_setsockopt's name copy cost 894,587
// instructions on 6.18 and went over the limit on 5.10, which then refused
// the whole object (per-socket lanes, caps, LEDBAT++ switching); the copy
// that stops at the name's end costs 542.
// Both background modes: LEDBAT++ as the congestion control (BgCCName),
// and without struct_ops, its window as the cwnd clamp (BgClampTargetUS).
func TestVerifierCost(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"struct_ops": {NetnsCookie: 1, NetnsInode: 1, NotsentLowat: 16384, CCName: "lanes_test",
			BgCCName: "lanes_bg_test", RLEDBATTargetUS: 60000, Yield: true},
		"cwnd_clamp": {NetnsCookie: 1, NetnsInode: 1, NotsentLowat: 16384,
			BgClampTargetUS: 10000, RLEDBATTargetUS: 60000, Yield: true},
	} {
		t.Run(name, func(t *testing.T) { verifierCost(t, cfg) })
	}
}

func verifierCost(t *testing.T, cfg Config) {
	spec, err := configured(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// lanes_live_cc loads on its own (the daemon's live_cc capability):
	// bpf_setsockopt from an iter/tcp program needs 5.14.
	delete(spec.Programs, "lanes_live_cc")
	opts := ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}}
	coll, err := ebpf.NewCollectionWithOptions(spec, opts)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			for _, l := range ve.Log[max(0, len(ve.Log)-8):] {
				t.Log(l)
			}
		}
		t.Fatal(err)
	}
	defer coll.Close()
	progs := coll.Programs
	if live := loadLiveForCost(t, coll, opts); live != nil {
		defer live.Close()
		progs = map[string]*ebpf.Program{"lanes_live_cc": live}
		for name, p := range coll.Programs {
			progs[name] = p
		}
	}
	processed := regexp.MustCompile(`(?m)^processed (\d+) insns`)
	stackDepth := regexp.MustCompile(`(?m)^stack depth .*$`)
	for name, p := range progs {
		m := processed.FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Fatalf("%s: no instruction count in the verifier's log: %q", name, p.VerifierLog)
		}
		n, _ := strconv.Atoi(m[1])
		if n > 100_000 {
			t.Errorf("%s: the verifier processed %d instructions, want <= 100,000 (a tenth of its limit)", name, n)
		} else {
			t.Logf("%s: the verifier processed %d instructions; %s", name, n, stackDepth.FindString(p.VerifierLog))
		}
	}
}

// loadLiveForCost loads lanes_live_cc beside coll's maps; nil on a kernel
// before 5.14, which refuses bpf_setsockopt from an iterator.
func loadLiveForCost(t *testing.T, coll *ebpf.Collection, opts ebpf.CollectionOptions) *ebpf.Program {
	spec, err := configured(Config{NetnsCookie: 1, NetnsInode: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name := range spec.Programs {
		if name != "lanes_live_cc" {
			delete(spec.Programs, name)
		}
	}
	opts.MapReplacements = coll.Maps
	live, err := ebpf.NewCollectionWithOptions(spec, opts)
	if err != nil {
		if !kernelAtLeast(5, 14) {
			t.Logf("lanes_live_cc does not load before 5.14 (the daemon's live_cc is off there): %v", err)
			return nil
		}
		t.Fatalf("lanes_live_cc: %v", err)
	}
	p := live.DetachProgram("lanes_live_cc")
	live.Close()
	return p
}

// kernelAtLeast compares the running kernel's release with major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return true
	}
	var maj, min int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &min)
	return maj > major || maj == major && min >= minor
}

// TestAllowedCCFollowsTheSysctl (audit N21): the allow-list was copied
// into lanes_cc_allowed at start, so a name the administrator removed
// from net.ipv4.tcp_allowed_congestion_control stayed allowed to every
// user's background socket, and a name added was refused. A sync makes
// the map the list given, removing what left it.
func TestAllowedCCFollowsTheSysctl(t *testing.T) {
	objs, _ := loadWithClassifier(t, Config{NetnsCookie: 1, NetnsInode: 1})
	for _, names := range [][]string{{"reno", "cubic"}, {"reno", "bbr"}, {"bbr"}, {}} {
		if err := syncAllowedCC(objs.LanesCcAllowed, names); err != nil {
			t.Fatal(err)
		}
		var got []string
		var key [16]byte
		var v uint8
		for it := objs.LanesCcAllowed.Iterate(); it.Next(&key, &v); {
			got = append(got, unix.ByteSliceToString(key[:]))
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(names))
		if !slices.Equal(got, want) {
			t.Fatalf("allow-list synced to %q holds %q", names, got)
		}
	}
}

// loadWithClassifier loads sock_ops with cfg beside a classifier whose maps
// it shares, both closed when t ends; it skips where not root.
func loadWithClassifier(t *testing.T, cfg Config) (*Objects, *classifier.ClassifierObjects) {
	t.Helper()
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	cls, err := classifier.Load(classifier.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cls.Close() })
	objs, err := Load(cfg, cls.Shared())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return objs, cls
}
