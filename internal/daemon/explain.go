// explain.go answers "why is this flow in this lane?" for live TCP sockets:
// the registration, rule, lane cgroup or marking that decided it. It looks
// the sockets up with sock_diag (address, ports, uid, cgroup id) and walks
// the precedence of docs/policy.md over what the daemon applied, which
// knows each map entry's source. `lanes monitor` shows the answer.
package daemon

import (
	"fmt"
	"net/netip"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// sockFacts is what decides a TCP socket's lane.
type sockFacts struct {
	cookie       uint64
	src, dst     netip.Addr
	dport, sport uint16
	uid          uint32
	cgroupID     uint64
}

// SocketReasons says, for each socket cookie of this namespace's TCP
// sockets, what decided its lane.
func (d *Daemon) SocketReasons(cookies []uint64) (map[uint64]string, error) {
	want := map[uint64]bool{}
	for _, c := range cookies {
		want[c] = true
	}
	s, err := tcpmon.New(tcpmon.Config{NoProcess: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	flows, err := s.Sample()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[uint64]string{}
	for _, f := range flows {
		if !want[f.Cookie] {
			continue
		}
		src, err1 := netip.ParseAddrPort(f.Src)
		dst, err2 := netip.ParseAddrPort(f.Dst)
		if err1 != nil || err2 != nil {
			continue
		}
		out[f.Cookie] = d.explainLocked(sockFacts{cookie: f.Cookie, src: src.Addr().Unmap(), dst: dst.Addr().Unmap(), dport: dst.Port(),
			sport: src.Port(), uid: f.UID, cgroupID: f.CgroupID})
	}
	return out, nil
}

// explainLocked walks the precedence for one socket (d.mu held).
func (d *Daemon) explainLocked(s sockFacts) string {
	var cur lane.Lane
	if d.host != nil {
		cur, _ = d.host.SocketLane(s.cookie)
	}
	for f, moved := range d.liveSockets {
		if findLive(moved, s.cookie) != nil {
			return fmt.Sprintf("registration %s (%s)", f, d.flows[f].Source)
		}
	}
	for _, k := range (datapath.FlowKey{Src: s.src, Dst: s.dst, DPort: s.dport, SPort: s.sport, Proto: 6}).Lookups() {
		if e, ok := d.applied.Flows[k]; ok {
			return "flow " + e.Source
		}
	}
	if r, e, ok := bestDst(d.applied.Dsts, s.dst, s.dport); ok {
		return fmt.Sprintf("destination %s %s", r, e.Source)
	}
	if e, ok := d.applied.Cgroups[s.cgroupID]; ok {
		return "cgroup " + e.Source
	}
	if e, ok := d.applied.UIDs[s.uid]; ok {
		return fmt.Sprintf("uid %d %s", s.uid, e.Source)
	}
	if cur != lane.Unset {
		// sock_ops matched something the exact lookups above do not see:
		// an ancestor of the socket's cgroup, or a rule since removed
		return fmt.Sprintf("resolved at connect to %s (a rule for a parent cgroup, or one since changed)", cur)
	}
	return "no rule: interactive (or its packets' DSCP marking)"
}

// bestDst is the destination rule the classifier picks: the packet's port
// before any port, then the longest prefix.
func bestDst(m map[datapath.DstRule]entry, dst netip.Addr, dport uint16) (datapath.DstRule, entry, bool) {
	for _, port := range []uint16{dport, 0} {
		var best datapath.DstRule
		found := false
		for r := range m {
			if r.DPort == port && r.Prefix.Contains(dst) && (!found || r.Prefix.Bits() > best.Prefix.Bits()) {
				best, found = r, true
			}
		}
		if found {
			return best, m[best], true
		}
		if port == 0 {
			break
		}
	}
	return datapath.DstRule{}, entry{}, false
}
