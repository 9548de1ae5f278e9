// structops_test.go: the daemon's congestion controls registered by map
// update (kernels before 6.4; forced here with --struct-ops-by-update)
// outlive a SIGKILLed daemon; its restart in the same namespace removes
// them before registering its own, and `lanes reset` removes what a second
// SIGKILL left.
package daemon_test

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/testutil"
)

// ccNameRE matches a lanes congestion control's name (structops.Name).
var ccNameRE = regexp.MustCompile(`\blanes_[0-9a-f]{8}\b`)

// updateMaps lists the lanes struct_ops maps registered by map update.
func updateMaps(t *testing.T) map[ebpf.MapID]string {
	t.Helper()
	left, err := structops.Find(structops.IsLanes)
	if err != nil {
		t.Fatal(err)
	}
	out := map[ebpf.MapID]string{}
	for _, l := range left {
		out[l.ID] = l.Name
	}
	return out
}

func TestMapUpdateCCsAfterSIGKILL(t *testing.T) {
	testutil.RequireRoot(t)
	if err := ledbat.Probe(); structops.Unsupported(err) {
		t.Skipf("degraded: lanes doctor reports %q absent: %v", features.LedbatFeature, err)
	}
	p := testutil.NewVethPair(t)
	before := updateMaps(t)
	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA), "--struct-ops-by-update")
	// this daemon's names, as its status gives them: other packages' tests
	// may register their own meanwhile
	st := status(t, sock).Interfaces[0]
	ours := ccNameRE.FindAllString(st.CwndCapCC+" "+st.BackgroundCC, -1)
	first := map[ebpf.MapID]string{}
	for id, n := range updateMaps(t) {
		if _, old := before[id]; !old && slices.Contains(ours, n) {
			first[id] = n
		}
	}
	names := slices.Sorted(maps.Values(first))
	t.Cleanup(func() { structops.Remove(names...) })
	want := 2 // cap_cc and background_cc
	if err := capcc.Probe(); structops.Unsupported(err) {
		want = 1 // background_cc alone, the path of 5.10-5.12
		t.Logf("no cap_cc on this kernel: %v", err)
	}
	if len(first) != want {
		t.Fatalf("daemon registered %v by map update, want %d (cap_cc where the kernel runs it, and background_cc)", first, want)
	}
	if bg := status(t, sock).Interfaces[0].BackgroundCC; !strings.Contains(bg, "registered by map update") {
		t.Errorf("status: background congestion control %q", bg)
	}

	d.stop(t, syscall.SIGKILL)
	for _, n := range names {
		if ok, _ := structops.Registered(n); !ok {
			t.Errorf("%s gone after SIGKILL: registered by map update it should stay (the check below would prove nothing)", n)
		}
	}
	d, _ = startDaemon(t, p.A, devicePolicy(p.LinkA), "--struct-ops-by-update")
	now := updateMaps(t)
	for id := range first {
		if _, ok := now[id]; ok {
			t.Errorf("the killed daemon's struct_ops map %d %s is still there after the restart", id, first[id])
		}
	}
	var again []string
	for _, n := range now {
		if slices.Contains(names, n) {
			again = append(again, n)
		}
	}
	if slices.Sort(again); !slices.Equal(again, names) {
		t.Errorf("after the restart registered %v, want %v", again, names)
	}

	d.stop(t, syscall.SIGKILL)
	if out, err := p.A.Command(lanesBin, "reset", "--socket", sock).CombinedOutput(); err != nil {
		t.Fatalf("lanes reset: %v\n%s", err, out)
	}
	for _, n := range names {
		if ok, _ := structops.Registered(n); ok {
			t.Errorf("%s still registered after SIGKILL + lanes reset", n)
		}
	}
	for id, n := range updateMaps(t) {
		if slices.Contains(names, n) {
			t.Errorf("struct_ops map %d %s left after lanes reset", id, n)
		}
	}
}
