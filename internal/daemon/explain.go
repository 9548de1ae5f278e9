// explain.go answers "why is this flow in this lane?" for live TCP sockets:
// the registration, rule, lane cgroup or marking that decided it. It looks
// the sockets up with sock_diag (address, ports, uid, cgroup id) and walks
// the precedence of docs/policy.md over what the daemon applied, which
// knows each map entry's source. `lanes monitor` shows the answer.
//
// Any local user may ask, so the work is bounded whatever the callers do:
// one sock_diag sampler (no BPF) made once and kept, and its sample reused
// by the requests that follow it; an empty request costs nothing.
package daemon

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

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
	dscp         uint8 // the socket's own marking
	// mover: what moved the process holding the socket (movers.go), if any
	mover   movedSock
	inMoved bool
}

// How long one sample of the namespace's TCP sockets answers socket-lanes
// requests: up to sampleReuse while it holds every cookie asked for, and
// sampleFresh when a cookie is missing (a socket newer than the sample). A
// flood of requests thus costs at most 1/sampleFresh socket walks a second.
const (
	sampleReuse = time.Second
	sampleFresh = 250 * time.Millisecond
)

// socketFacts is the daemon's one sock_diag sampler and its last sample.
type socketFacts struct {
	mu    sync.Mutex
	s     *tcpmon.Sampler
	at    time.Time
	flows []tcpmon.Flow
}

// sample returns a sample of the sockets, reused as the constants above
// say (callers must not change it).
func (f *socketFacts) sample(want map[uint64]bool) ([]tcpmon.Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if age := time.Since(f.at); f.s != nil && (age < sampleFresh || age < sampleReuse && f.holds(want)) {
		return f.flows, nil
	}
	if f.s == nil {
		s, err := tcpmon.New(tcpmon.Config{NoProcess: true, Backend: tcpmon.BackendDiag})
		if err != nil {
			return nil, err
		}
		f.s = s
	}
	flows, err := f.s.Sample()
	if err != nil {
		return nil, err
	}
	f.flows, f.at = flows, time.Now()
	return flows, nil
}

// holds says whether the last sample has every cookie of want.
func (f *socketFacts) holds(want map[uint64]bool) bool {
	n := 0
	for _, fl := range f.flows {
		if want[fl.Cookie] {
			n++
		}
	}
	return n == len(want)
}

// close releases the sampler (at the daemon's stop).
func (f *socketFacts) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.s != nil {
		f.s.Close()
		f.s, f.flows = nil, nil
	}
}

// SocketReasons says, for each socket cookie of this namespace's TCP
// sockets, what decided its lane.
func (h *apiHandlers) SocketReasons(cookies []uint64) (map[uint64]string, error) {
	out := map[uint64]string{}
	if len(cookies) == 0 {
		return out, nil
	}
	want := make(map[uint64]bool, len(cookies))
	for _, c := range cookies {
		want[c] = true
	}
	flows, err := h.facts.sample(want)
	if err != nil {
		return nil, err
	}
	movers := h.moves.moverInodes()
	var asked []sockFacts
	for _, f := range flows {
		if !want[f.Cookie] {
			continue
		}
		src, err1 := netip.ParseAddrPort(f.Src)
		dst, err2 := netip.ParseAddrPort(f.Dst)
		if err1 != nil || err2 != nil {
			continue
		}
		asked = append(asked, sockFacts{cookie: f.Cookie, src: src.Addr().Unmap(), dst: dst.Addr().Unmap(), dport: dst.Port(),
			sport: src.Port(), uid: f.UID, cgroupID: f.CgroupID, dscp: f.DSCP})
		asked[len(asked)-1].mover, asked[len(asked)-1].inMoved = movers[f.Inode]
	}
	for len(asked) > 0 { // the lock per cookieChunk sockets, as in SocketLanes
		n := min(len(asked), cookieChunk)
		h.kernel.mu.Lock()
		for _, s := range asked[:n] {
			out[s.cookie] = h.explainLocked(s)
		}
		h.kernel.mu.Unlock()
		asked = asked[n:]
	}
	return out, nil
}

// explainLocked walks the precedence for one socket (kernel.mu held).
func (h *apiHandlers) explainLocked(s sockFacts) string {
	var cur lane.Lane
	if h.kernel.host != nil {
		cur, _ = h.kernel.host.sockets.SocketLane(s.cookie)
	}
	if r, ok := h.regs.holding(s.cookie); ok {
		return fmt.Sprintf("registration %s (%s)", r.Flow, r.Source)
	}
	if m, ok := h.moves.socket(s.cookie); ok {
		return m.why()
	}
	if s.inMoved && s.mover.lane == cur {
		return s.mover.why() // opened after its process was moved: in the lane's cgroup
	}
	for _, k := range (datapath.FlowKey{Src: s.src, Dst: s.dst, DPort: s.dport, SPort: s.sport, Proto: 6}).Lookups() {
		if e, ok := h.kernel.applied.Flows[k]; ok {
			return "flow " + e.Source
		}
	}
	if r, e, ok := bestDst(h.kernel.applied.Dsts, s.dst, s.dport); ok {
		return fmt.Sprintf("destination %s %s", r, e.Source)
	}
	if e, ok := h.kernel.applied.Cgroups[s.cgroupID]; ok {
		if s.inMoved && s.mover.lane == e.Lane {
			return s.mover.why()
		}
		return "cgroup " + e.Source
	}
	if e, ok := h.kernel.applied.UIDs[s.uid]; ok {
		return fmt.Sprintf("uid %d %s", s.uid, e.Source)
	}
	if why, l, ok := h.dscpLaneLocked(s.dscp); ok && (cur == lane.Unset || cur == l) {
		return why // sock_ops too resolves a socket by its marking (dscp.h)
	}
	if cur != lane.Unset {
		// sock_ops matched something the exact lookups above do not see:
		// an ancestor of the socket's cgroup, or a rule since removed
		return fmt.Sprintf("resolved at connect to %s (a rule for a parent cgroup, or one since changed)", cur)
	}
	return "no rule: interactive"
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

// dscpLaneLocked is the lane the classifier gives a socket's packets by
// their own DSCP marking once nothing before it matched, with why: "DSCP
// LE (dscp.le_background)" (kernel.mu held).
func (h *apiHandlers) dscpLaneLocked(dscp uint8) (string, lane.Lane, bool) {
	e, ok := h.kernel.applied.DSCP[dscp]
	if !ok {
		return "", lane.Unset, false
	}
	return fmt.Sprintf("%s (%s)", dscpName(dscp), e.Source), e.Lane, true
}

// dscpName is a DSCP value as people know it.
func dscpName(v uint8) string {
	switch v {
	case lane.DSCPLowerEffort:
		return "DSCP LE"
	case lane.DSCPExpedited:
		return "DSCP EF"
	}
	return fmt.Sprintf("DSCP %d", v)
}

// addDSCPLanes adds to lanes the sockets among cookies that have no lane of
// their own (nothing matched them at connect) and whose own DSCP marking
// has one: the classifier's last match before the default.
func (h *apiHandlers) addDSCPLanes(cookies []uint64, lanes map[uint64]lane.Lane) {
	want := map[uint64]bool{}
	for _, c := range cookies {
		if l, ok := lanes[c]; !ok || l == lane.Unset {
			want[c] = true
		}
	}
	h.kernel.mu.Lock()
	marked := len(h.kernel.applied.DSCP) > 0
	h.kernel.mu.Unlock()
	if len(want) == 0 || !marked {
		return
	}
	flows, err := h.facts.sample(want)
	if err != nil {
		return
	}
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	for _, f := range flows {
		if want[f.Cookie] {
			if _, l, ok := h.dscpLaneLocked(f.DSCP); ok {
				lanes[f.Cookie] = l
			}
		}
	}
}
