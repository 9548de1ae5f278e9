// pinned_test.go: the OEM path end to end. The Android form of lanes'
// classifier and sock_ops loaded and pinned as NetBpfLoad does at boot
// (under a bpffs of the test's own), and `lanes daemon --pinned-bpf`
// running on them: its egress filter is the pinned program, the pinned
// sock_ops resolves a policy rule's upload at connect, the upload counts
// in the pinned maps and in the background class, and the pins outlive
// the daemon (they are the loader's).
package daemon_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/android"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestDaemonOnPinnedObjects(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
		t.Fatalf("bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	loc := android.Locations[0]
	for _, obj := range []string{"classifier", "sockops"} {
		if _, err := android.LoadAndPin("../bpf/android/objects/"+obj+".o", loc, root); err != nil {
			t.Fatal(err)
		}
	}
	progPin := android.Under(root, android.ProgPin(loc.Prefix, "classifier", "schedcls/lanes_classify"))
	prog, err := ebpf.LoadPinnedProgram(progPin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()

	p := testutil.NewVethPair(t)
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	pol := devicePolicy(p.LinkA) + fmt.Sprintf("rules:\n  - {name: upload, lane: background, dst: %s, dport: 8080}\n", p.AddrB)
	d, sock := startDaemon(t, p.A, pol, "--pinned-bpf", root, "--pinned-prefix", loc.Prefix)

	f, _ := p.A.Command("tc", "filter", "show", "dev", p.LinkA).CombinedOutput()
	m := regexp.MustCompile(`\bid (\d+)`).FindSubmatch(f)
	if m == nil {
		t.Fatalf("no BPF filter on %s:\n%s", p.LinkA, f)
	}
	if got, _ := strconv.Atoi(string(m[1])); got != int(id) {
		t.Errorf("the egress filter runs program %d, the pinned one is %d:\n%s", got, id, f)
	}
	if err := transfer(t, p); err != nil {
		t.Fatal(err)
	}
	var bg uint64
	for _, l := range status(t, sock).Interfaces[0].Lanes {
		if l.Lane.String() == "background" {
			bg = l.Packets
		}
	}
	stats, err := ebpf.LoadPinnedMap(android.Under(root, android.MapPin(loc.Prefix, "classifier", "lanes_cls_stats", false)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	var counted uint64
	for k := range uint32(abi.MatchKinds) {
		var per []abi.Counter
		if err := stats.Lookup(k*uint32(abi.LaneSlots)+3, &per); err != nil {
			t.Fatal(err)
		}
		for _, c := range per {
			counted += c.Packets
		}
	}
	byDst, lowat := pinnedCount(t, root, loc, abi.AbiOpsCounterOPS_BY_DST), pinnedCount(t, root, loc, abi.AbiOpsCounterOPS_NOTSENT_LOWAT)
	t.Logf("background class %d packets; the pinned lanes_cls_stats counted %d background packets; the pinned sock_ops resolved %d by destination, set TCP_NOTSENT_LOWAT on %d",
		bg, counted, byDst, lowat)
	if bg == 0 || counted == 0 || byDst == 0 || lowat == 0 {
		t.Errorf("the rule's upload: background class %d packets, pinned counters %d, sock_ops by destination %d, TCP_NOTSENT_LOWAT %d; want each > 0",
			bg, counted, byDst, lowat)
	}
	d.stop(t, syscall.SIGTERM)
	if left := leftovers(t, p.A, p.LinkA); len(left) > 0 {
		t.Errorf("left behind after SIGTERM: %q", left)
	}
	if _, err := os.Stat(progPin); err != nil {
		t.Errorf("the loader's pin went with the daemon: %v", err)
	}
}

// pinnedCount sums one counter of the pinned sock_ops' lanes_ops_stats.
func pinnedCount(t *testing.T, root string, loc android.Location, c abi.AbiOpsCounter) uint64 {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(android.Under(root, android.MapPin(loc.Prefix, "sockops", "lanes_ops_stats", false)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var per []uint64
	if err := m.Lookup(uint32(c), &per); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}
