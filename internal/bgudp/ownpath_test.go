// ownpath_test.go: attack test for the class's own-delay harm (audit N20):
// a peer a user controls that delays its probe answers raises that
// peer's queue only; it must not stamp the interface harmed, which would
// hold every user's background there.
package bgudp

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
)

// Audit N20, the class's side: beside an untold foreground, two peers
// answer; one delays its answers 30 ms. Its queue is its own path's: no
// harm is marked. When both show the queue (a shared bottleneck) it is.
func TestOnePeersDelayMarksNoHarm(t *testing.T) {
	honest, attacker := netip.MustParseAddrPort("10.0.0.2:443"), netip.MustParseAddrPort("10.0.0.3:443")
	for _, c := range []struct {
		name     string
		delay    map[netip.AddrPort]time.Duration
		wantHarm bool
	}{
		{"one peer delays its answers", map[netip.AddrPort]time.Duration{attacker: 30 * time.Millisecond}, false},
		{"a shared bottleneck's queue", map[netip.AddrPort]time.Duration{honest: 30 * time.Millisecond, attacker: 30 * time.Millisecond}, true},
	} {
		dp := &fakeDP{present: true}
		e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(10 * time.Millisecond)}}
		sig := newDelaySignal(e.state.Rule.Target)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		var prev, cur [2]datapath.BgClass
		for n := range 40 {
			res := map[netip.AddrPort]peerResult{}
			for _, a := range []netip.AddrPort{honest, attacker} {
				rtt := 20 * time.Millisecond
				if n >= 10 {
					rtt += c.delay[a]
				}
				res[a] = peerResult{rtt: rtt}
			}
			cur[datapath.Upload].Bytes += 10_000
			cur[datapath.Upload].Packets += 10
			in := Input{Dt: e.state.Rule.Interval}
			sig.step(res, &in)
			if err := e.control(dp, log, &in, false, prev, cur, e.state.Rule.Target); err != nil {
				t.Fatal(err)
			}
			prev = cur
		}
		if got := len(dp.harms) > 0; got != c.wantHarm {
			t.Errorf("%s: %d harm marks %v, want harm %v", c.name, len(dp.harms), dp.harms, c.wantHarm)
		}
	}
}
