// structops_test.go checks the congestion controls registered by map update,
// the path of kernels 5.6-6.3 (no struct_ops bpf_link), forced here on a
// kernel that has links: a SIGKILLed datapath leaves both registered (the
// registration holds its map), and the next Open of the same instance in
// the same namespace removes them before it registers its own, then Close
// leaves nothing.
package datapath

import (
	"slices"
	"testing"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestMapUpdateCCsAdoptedAfterSIGKILL(t *testing.T) {
	requireCgroup2(t)
	if err := ledbat.Probe(); structops.Unsupported(err) {
		t.Skipf("degraded: lanes doctor reports %q absent: %v", features.LedbatFeature, err)
	}
	p := testutil.NewVethPair(t)
	var names []string
	t.Cleanup(func() { // after the helper's own (cleanups run last first)
		p.A.Do(t, func() error { return Cleanup(p.LinkA, "kill2", testStateDir) })
		structops.Remove(names...) // whatever the test left, also when it failed
	})
	h := startOpenHelper(t, p, "kill2", "LANES_DP_STRUCTOPS=update")
	cc, bg := h.cc, h.bg
	for _, n := range []string{cc, bg} {
		if n != "-" {
			names = append(names, n)
		}
	}
	if bg == "-" {
		t.Fatalf("helper: no background congestion control (%s %s)", cc, bg)
	}
	if cc == "-" {
		// Before 5.13 (CUBIC's kfuncs): the background one alone is
		// checked, on the path those kernels take.
		t.Logf("no cwnd-cap congestion control here: %v", capcc.Probe())
	}
	h.kill()

	ours := func(n string) bool { return slices.Contains(names, n) }
	for _, n := range names {
		if ok, _ := structops.Registered(n); !ok {
			t.Errorf("%s not registered after SIGKILL (registered by map update, it should outlive the process)", n)
		}
	}
	if left, err := structops.Find(ours); err != nil || len(left) != len(names) {
		t.Fatalf("struct_ops maps left after SIGKILL: %v, %v (expected %d)", left, err, len(names))
	}

	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "kill2", StructOps: structops.Update})
	s, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if cc != "-" && (!s.CapCC.Active || s.CapCC.Name != cc || s.CapCC.Registered != "map update") {
		t.Errorf("restart: cap_cc %+v (the leftover %s should have been removed first)", s.CapCC, cc)
	}
	if !s.Background.Active || s.Background.Name != bg || s.Background.Registered != "map update" {
		t.Errorf("restart: background_cc %+v (the leftover %s should have been removed first)", s.Background, bg)
	}
	if left, _ := structops.Find(ours); len(left) != len(names) {
		t.Errorf("after restart: %v (expected the new run's %d maps)", left, len(names))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if ok, _ := structops.Registered(n); ok {
			t.Errorf("%s still registered after Close", n)
		}
	}
	if left, _ := structops.Find(ours); len(left) != 0 {
		t.Errorf("struct_ops maps after Close: %v", left)
	}
}
