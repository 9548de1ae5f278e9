// ruletable_test.go is the table of rule combinations run through the real
// classifier, as root: each policy goes through the daemon's desired state
// into a real host's maps, and packets (BPF_PROG_TEST_RUN, the kernel's
// dummy socket: uid 0, this test's cgroup) must get exactly the lane and
// match kind the rule means; combinations the datapath cannot apply are
// refused at load with their line.
package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// frame is an Ethernet frame from this host's first address (10.99.0.1 or
// fd00:99::1): IPv4 or IPv6 by dst, TCP ports, DSCP.
func frame(dst string, sport, dport uint16, dscp uint8) []byte {
	src := "10.99.0.1"
	if netip.MustParseAddr(dst).Is6() {
		src = "fd00:99::1"
	}
	return frameFrom(src, dst, sport, dport, dscp)
}

// frameFrom is frame from the local address src.
func frameFrom(src, dst string, sport, dport uint16, dscp uint8) []byte {
	d, sa := netip.MustParseAddr(dst), netip.MustParseAddr(src)
	eth := make([]byte, 14)
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if d.Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0], ip[1], ip[8], ip[9] = 0x45, dscp<<2, 64, 6
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		s4 := sa.As4()
		copy(ip[12:], s4[:])
		a := d.As4()
		copy(ip[16:], a[:])
		return append(append(eth, ip...), l4...)
	}
	binary.BigEndian.PutUint16(eth[12:], 0x86dd)
	ip := make([]byte, 40)
	ip[0], ip[1] = 0x60|dscp>>2, dscp<<6
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6], ip[7] = 6, 64
	s := sa.As16()
	a := d.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], a[:])
	return append(append(eth, ip...), l4...)
}

// selfCgroup is this process's cgroup v2 path (relative to the mount).
func selfCgroup(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	t.Skip("no cgroup v2 membership")
	return ""
}

type pktCase struct {
	pkt  []byte
	lane lane.Lane
	kind classifier.Kind
}

func TestRuleTableThroughClassifier(t *testing.T) {
	testutil.RequireRoot(t)
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("needs cgroup v2")
	}
	for i, tc := range ruleTableCases(selfCgroup(t)) {
		t.Run(tc.name, func(t *testing.T) { runRuleTableCase(t, root, fmt.Sprintf("rt%d", i), tc) })
	}
}

// ruleTableCase is a policy's rules and the packets they must classify,
// or the field its refusal must name.
type ruleTableCase struct {
	name, rules string // rules: YAML list items; dscp: section after
	refused     string // part of the refusal, "" = accepted
	pkts        []pktCase
}

// ruleTableCases: every rule kind, their precedence, and the refusals;
// self is this process's cgroup.
func ruleTableCases(self string) []ruleTableCase {
	bg, rt, in := lane.Background, lane.Realtime, lane.Interactive
	return []ruleTableCase{
		{"dst prefix, any port", "  - {lane: background, dst: 10.77.0.0/16}\n", "", []pktCase{
			{frame("10.77.1.1", 5000, 80, 0), bg, classifier.KindDst},
			{frame("10.78.1.1", 5000, 80, 0), in, classifier.KindDefault}}},
		{"dst + dport", "  - {lane: background, dst: 10.77.1.1, dport: 443}\n", "", []pktCase{
			{frame("10.77.1.1", 5000, 443, 0), bg, classifier.KindDst},
			{frame("10.77.1.1", 5000, 80, 0), in, classifier.KindDefault}}},
		{"3-tuple", "  - {lane: realtime, dst: 10.77.1.1, dport: 443, sport: 5000}\n", "", []pktCase{
			{frame("10.77.1.1", 5000, 443, 0), rt, classifier.KindTuple},
			{frame("10.77.1.1", 5001, 443, 0), in, classifier.KindDefault}}},
		{"5-tuple: the local address", "  - {lane: realtime, dst: 10.77.1.1, dport: 443, sport: 5000, src: 10.99.0.1}\n", "", []pktCase{
			{frameFrom("10.99.0.1", "10.77.1.1", 5000, 443, 0), rt, classifier.KindTuple},
			{frameFrom("10.99.0.2", "10.77.1.1", 5000, 443, 0), in, classifier.KindDefault}}},
		{"5-tuple beats 3-tuple", "  - {lane: background, dst: 10.77.1.1, dport: 443, sport: 5000}\n  - {lane: realtime, dst: 10.77.1.1, dport: 443, sport: 5000, src: 10.99.0.1}\n", "", []pktCase{
			{frameFrom("10.99.0.1", "10.77.1.1", 5000, 443, 0), rt, classifier.KindTuple},
			{frameFrom("10.99.0.2", "10.77.1.1", 5000, 443, 0), bg, classifier.KindTuple}}},
		{"v6 5-tuple", "  - {lane: background, dst: '2001:db8::5', dport: 443, sport: 5000, src: 'fd00:99::1'}\n", "", []pktCase{
			{frameFrom("fd00:99::1", "2001:db8::5", 5000, 443, 0), bg, classifier.KindTuple},
			{frameFrom("fd00:99::2", "2001:db8::5", 5000, 443, 0), in, classifier.KindDefault}}},
		{"v6 prefix", "  - {lane: background, dst: '2001:db8::/32'}\n", "", []pktCase{
			{frame("2001:db8::5", 5000, 80, 0), bg, classifier.KindDst},
			{frame("2001:db9::5", 5000, 80, 0), in, classifier.KindDefault}}},
		{"uid", "  - {lane: background, uid: 0}\n", "", []pktCase{
			{frame("10.78.1.1", 5000, 80, 0), bg, classifier.KindUID}}},
		{"cgroup", "  - {lane: background, cgroup: " + self + "}\n", "", []pktCase{
			{frame("10.78.1.1", 5000, 80, 0), bg, classifier.KindCgroup}}},
		{"dscp", "  - {lane: realtime, dscp: 46}\n", "", []pktCase{
			{frame("10.78.1.1", 5000, 80, 46), rt, classifier.KindDSCP},
			{frame("10.78.1.1", 5000, 80, 1), bg, classifier.KindDSCP}, // le_background default
			{frame("10.78.1.1", 5000, 80, 8), in, classifier.KindDefault}}},
		{"le_background off", "  []\ndscp: {le_background: false}\n", "", []pktCase{
			{frame("10.78.1.1", 5000, 80, 1), in, classifier.KindDefault}}},
		{"dst beats uid", "  - {lane: background, dst: 10.77.0.0/16}\n  - {lane: realtime, uid: 0}\n", "", []pktCase{
			{frame("10.77.1.1", 5000, 80, 0), bg, classifier.KindDst},
			{frame("10.78.1.1", 5000, 80, 0), rt, classifier.KindUID}}},
		{"port rule beats longer any-port prefix", "  - {lane: realtime, dst: 10.0.0.0/8, dport: 22}\n  - {lane: background, dst: 10.77.0.0/16}\n", "", []pktCase{
			{frame("10.77.1.1", 5000, 22, 0), rt, classifier.KindDst},
			{frame("10.77.1.1", 5000, 80, 0), bg, classifier.KindDst}}},
		{"uid AND dscp refused", "  - {lane: background, uid: 0, dscp: 46}\n", "rules[0].dscp", nil},
		{"cgroup AND uid refused", "  - {lane: background, cgroup: /a, uid: 0}\n", "rules[0].uid", nil},
		{"dst AND uid refused", "  - {lane: background, dst: 10.77.0.0/16, uid: 0}\n", "rules[0].uid", nil},
		{"src without the tuple refused", "  - {lane: background, dst: 10.77.0.0/16, src: 10.99.0.1}\n", "rules[0].src", nil},
		{"src of another family refused", "  - {lane: background, dst: 10.77.1.1, dport: 443, sport: 5000, src: 'fd00:99::1'}\n", "rules[0].src", nil},
		{"sport without dport refused", "  - {lane: background, dst: 10.77.1.1, sport: 5000}\n", "rules[0].sport", nil},
	}
}

// runRuleTableCase parses tc's policy and, if accepted, installs it in a
// daemon named name on a fresh namespace, then runs its packets through
// the classifier.
func runRuleTableCase(t *testing.T, root, name string, tc ruleTableCase) {
	cgID := func(rel string) (uint64, error) {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(root, rel), &st); err != nil {
			return 0, err
		}
		return st.Ino, nil
	}
	text := "interfaces: [{name: not-here}]\nrules:\n" + tc.rules
	pol, err := policy.Parse("table.yaml", []byte(text))
	if tc.refused != "" {
		var pe *policy.Error
		if !errors.As(err, &pe) || pe.Field != tc.refused || pe.Line != 3 {
			t.Fatalf("want refused at table.yaml:3: %s, got %v", tc.refused, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	ns := testutil.NewNetNS(t)
	e := env{
		openHost: func(c datapath.HostConfig) (*datapathHost, error) {
			var h *datapath.Host
			if err := ns.Run(func() (err error) { h, err = datapath.OpenHost(c); return err }); err != nil {
				return nil, err
			}
			return kernelHost(h), nil
		},
		links:    &world{links: map[string]int{}},
		cgroupID: cgID,
		watch:    func(ctx context.Context, _ func()) error { <-ctx.Done(); return nil },
	}
	d := newDaemon(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, name, pol, e)
	d.cgroups.root = root
	if err := d.install(); err != nil {
		t.Fatal(err)
	}
	defer d.uninstall()
	h := d.kernel.host.core.(*datapath.Host)
	for j, p := range tc.pkts {
		l, k, err := h.TryClassify(p.pkt)
		if err != nil {
			t.Fatal(err)
		}
		if l != p.lane || k != p.kind {
			t.Errorf("packet %d: %s by %s, want %s by %s", j, l, k, p.lane, p.kind)
		}
	}
}
