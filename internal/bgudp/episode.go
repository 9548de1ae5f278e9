// episode.go: one interface's controlled period, from the classifier's
// event to episodeQuiet without the class's traffic.
package bgudp

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/yield"
)

const (
	maxPeers   = 4  // peers (address and port) probed per interface
	peersEvery = 20 // steps between reads of the interface's peers
	icmpRetry  = 20 // steps between echoes to a peer silent to them
	vnEvery    = 2  // steps between version probes to a port
)

// Episode is one interface's controlled period, as status shows it.
type Episode struct {
	Ifindex    int
	Peer       netip.Addr       // the peer whose traffic began the episode
	Peers      []netip.AddrPort `json:",omitempty"` // the flows' remote ends on the interface
	Version    uint64           `json:",omitempty"` // QUIC version probes sent (to peers silent to ICMP echo)
	Started    time.Time
	Ended      time.Time `json:",omitzero"`
	Err        string    `json:",omitempty"`
	Controlled string    // the direction the rate applies to ("" before the first step)
	Rate       uint64    // bytes/s, 0: not policed
	Measured   uint64    // the class's rate over the last step, bytes/s
	Link       uint64    // the link's rate as estimated, bytes/s (0: not yet)
	Room       uint64    `json:",omitempty"` // a shaped class's bound: what the other lanes leave of the measured link, bytes/s
	Held       bool      // the yield holds the class now
	Blind      bool      // no peer answers: held at the floor
	Sharing    bool      // a foreground is present: the class keeps a share of the target
	Shaped     bool      // the controlled rate is a shaper's (the class waits above it), not the policer's
	UnderLink  bool      // held under its measured link: its sender waits on the shaper, which drops none of it (State.UnderLink)
	Base       time.Duration
	Queue      time.Duration
	Probes     uint64 // echo requests sent
	Lost       uint64
	ProbeBytes uint64 // requests and replies, IP bytes
}

// episode is one interface's controller while its class has traffic.
type episode struct {
	mu      sync.Mutex
	state   State
	dir     datapath.Direction // the controlled direction
	dirs    dirChoice
	shape   [2]shaper // the shapers by direction (shape.go)
	yield   uint64    // the yield's rate set on both directions (0: the default)
	counted [2]uint64 // the interface's bytes sent (Upload) and received (Download) at the last step (0: not read)
	acks    [2]bool   // the directions marked as carrying only the other's acknowledgments (markAcks)
	Episode
}

// run probes and steps until the class is quiet or ctx ends; it releases
// the rate it set.
func (e *episode) run(ctx context.Context, dp Datapath, log *slog.Logger) (err error) {
	p := newProber(dp.OwnSocket)
	defer p.close()
	sig := newDelaySignal(e.state.Rule.Target)
	defer func() {
		e.shape[datapath.Upload].set(dp, e.Ifindex, datapath.Upload, 0, log)
		e.shape[datapath.Download].set(dp, e.Ifindex, datapath.Download, 0, log)
		e.setYieldRate(dp, datapath.BgYieldBytes)
		e.markAcks(dp, [2]bool{})
		_ = dp.SetBgRate(e.Ifindex, datapath.Upload, 0, false)
		_ = dp.SetBgRate(e.Ifindex, datapath.Download, 0, false)
	}()
	prev, at, err := e.read(dp)
	if err != nil {
		return err
	}
	active, target := at, e.state.Rule.Target
	var peers []netip.AddrPort
	turn, room := 0, newProbeRoom()
	for n := 0; ; n++ {
		tick := time.Now()
		if n%peersEvery == 0 {
			peers = e.peers(dp, log)
		}
		// one probe per step, the targets in turn: the daemon's own
		// packets stay below the classifier's foreground threshold
		// (FG_MIN_PACKETS in 100 ms) however many peers the class has
		if targets := probeTargets(n, peers, sig); len(targets) > 0 &&
			room.allows(probeSize(targets[turn%len(targets)]), p.Bytes) {
			a := targets[turn%len(targets)]
			turn++
			if err := p.send(a); err != nil {
				log.Debug("bgudp: probe", "target", a, "err", err)
			}
		}
		res := p.collect(tick, tick.Add(e.state.Rule.Interval))
		cur, now, err := e.read(dp)
		if err != nil {
			return err
		}
		if cur[0].Packets != prev[0].Packets || cur[1].Packets != prev[1].Packets {
			active = now
		} else if now.Sub(active) > episodeQuiet {
			return nil
		}
		in := Input{Dt: now.Sub(at)}
		blind := sig.step(res, &in)
		if err := e.control(dp, log, &in, blind, prev, cur, target); err != nil {
			return err
		}
		room.refill(e.state.ProbeBudget(in.Offered), in.Dt, p.Bytes, moved(prev, cur))
		e.mu.Lock()
		e.Probes, e.Lost, e.ProbeBytes = p.Sent, sig.Lost, p.Bytes
		e.Peers, e.Version = peers, p.VersionSent
		e.mu.Unlock()
		prev, at = cur, now
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(tick.Add(e.state.Rule.Interval))):
		}
	}
}

// control steps the rule on one step's counters and delay signal (in's
// Signal, Queue, Raw, Base and Dt filled in) and sets the controlled
// direction's rate.
func (e *episode) control(dp Datapath, log *slog.Logger, in *Input, blind bool, prev, cur [2]datapath.BgClass, target time.Duration) error {
	d := e.dirs.choose(e.dir, prev, cur, in.Dt)
	if d != e.dir { // the other direction took over: the old one keeps its rate
		e.state.Rate = e.dirs.handOver(e.dir, d, e.state.Rate)
	}
	e.dir = d
	var acks [2]bool
	acks[1-d] = e.dirs.acks(1 - d)
	e.markAcks(dp, acks)
	if o := 1 - d; e.dirs.release(o) {
		e.shape[o].set(dp, e.Ifindex, o, 0, log)
		if err := dp.SetBgRate(e.Ifindex, o, 0, false); err != nil {
			return err
		}
	}
	shaped, backlog, dropped, wasShaped := e.shape[d].passed(dp, e.Ifindex, d, in.Dt)
	e.ownDirection(dp, in, d)
	e.stepInput(dp, in, d, prev, cur, target)
	e.linkBytes(dp, in, d)
	if q := in.harmQueue(); in.Signal && e.Sharing && q > yield.HarmQueue {
		// beside a foreground no TCP sample speaks for (a call), the
		// class's own queue is that foreground's harm: the kernel holds
		// the class at the yield's rate
		dp.MarkOwnHarm(e.Ifindex, q)
	}
	if wasShaped {
		in.Passed = min(in.Passed, shaped) // what left the shaper; the rest waits in it
		in.Shaped, in.Backlog, in.Dropped = true, backlog, dropped
	}
	before := e.state.Rate
	rate := e.state.Step(*in)
	e.account(dp, log, d, in.Shaped)
	if blind && !in.Held {
		rate = e.state.Blind()
	}
	e.setYieldRate(dp, min(datapath.BgYieldBytes, e.state.Floor()))
	e.mu.Lock()
	e.Controlled, e.Rate, e.Measured, e.Held, e.Blind = d.String(), rate, in.Offered, in.Held, blind
	e.Queue, e.Link, e.Room, e.UnderLink = e.state.Queue, e.state.Link, e.state.account(*in).room(in.Shaped, e.state.Rule.Off.Room), e.state.UnderLink
	if in.Signal {
		e.Base = in.Base
	}
	e.mu.Unlock()
	log.Debug("bgudp: step", "dir", d, "signal", in.Signal, "base", in.Base, "queue", in.Queue, "raw", in.Raw, "age", in.Age, "other", in.Other, "offered", in.Offered,
		"passed", in.Passed, "all", in.AllLanes, "link", e.state.Link, "measured", e.state.measured, "known", e.state.known(),
		"backlog", in.Backlog, "dropped", in.Dropped, "rate", rate, "held", in.Held, "blind", blind,
		"target", e.state.Rule.Target, "shaped", e.shape[d].rate != 0)
	if e.shape[d].usable(e.state.Rule, d) && e.shape[d].set(dp, e.Ifindex, d, rate, log) {
		e.mu.Lock()
		e.Shaped = rate != 0
		e.mu.Unlock()
		return nil // the policer stays unset: the yield alone applies there
	}
	e.mu.Lock()
	e.Shaped = false
	e.mu.Unlock()
	return dp.SetBgRate(e.Ifindex, d, rate, e.state.Rule.emptyAt(before, rate))
}

// otherSteps bounds the age of the other direction's queue ownDirection
// takes, in steps: a few, as the probes' current delay spans currentSpan;
// or two of the probes' round trips, the longer (a sender behind a
// standing queue of 400 ms reads its ACKs in bursts a round trip apart).
const otherSteps = 4

// ownDirection takes direction d's opposite's queue, as foreground TCP
// sockets' timestamps read it (DirectionQueue: the largest reading of the
// last two 100 ms slots), off the probes' queue: an echo crosses both directions, and the class in d
// yields for d's queue alone (a download is not held for a bulk upload's
// queue, nor the reverse). Without such a socket the probes' RTT stands
// for both.
func (e *episode) ownDirection(dp Datapath, in *Input, d datapath.Direction) {
	if !in.Signal || e.state.Rule.Off.BothWays {
		return
	}
	fresh := max(otherSteps*e.state.Rule.Interval, 2*(in.Base+in.Raw))
	q, ok := dp.DirectionQueue(e.Ifindex, 1-d, fresh)
	if !ok || q <= 0 {
		return
	}
	in.Other = q
	in.Queue, in.Raw, in.Least = max(0, in.Queue-q), max(0, in.Raw-q), max(0, in.Least-q)
}

// harmQueue is the class's own queue that holds its interface as an
// untold foreground's harm: with two or more peers speaking, the least of
// theirs (a shared bottleneck's queue shows on every path; a peer that
// delays its answers, or its own path's queue, shows on its own only and
// holds no other user's background), else Queue.
func (in *Input) harmQueue() time.Duration {
	if in.Spoke < 2 {
		return in.Queue
	}
	return in.Least
}

// stepInput fills in's rates and the yield's state from the counters of
// the controlled direction d.
func (e *episode) stepInput(dp Datapath, in *Input, d datapath.Direction, prev, cur [2]datapath.BgClass, target time.Duration) {
	secs := max(in.Dt.Seconds(), 1e-3)
	i := int(d)
	offered := cur[i].Bytes - prev[i].Bytes
	dropped := min(offered, cur[i].DropBytes-prev[i].DropBytes)
	in.Offered, in.Passed = uint64(float64(offered)/secs), uint64(float64(offered-dropped)/secs)
	in.Arrived = d == datapath.Download
	off := e.state.Rule.Off
	if cur[datapath.Download].Bytes != prev[datapath.Download].Bytes && !off.Arrivals ||
		cur[datapath.Upload].Bytes != prev[datapath.Upload].Bytes && !off.BothWays {
		dp.MarkBgActive() // foreground downloads' harm and queue are read while the class moves (fgrcv.h)
	}
	present, quiet := dp.Foreground(e.Ifindex, d)
	held, sharing := yieldOf(d, dp.BgClassHeld(e.Ifindex, d), present, e.state.Rule.Off)
	in.Held, in.Quiet = held, quiet
	e.mu.Lock()
	e.state.Rule.Target, e.Sharing = target, sharing
	if e.Sharing {
		e.state.Rule.Target = yield.ShareTarget(target)
	}
	e.mu.Unlock()
}

// account gives a shaped upload's measured link (a window's with a
// standing queue, not a lower bound) to the interface's account, one
// estimate for every transport's upload.
func (e *episode) account(dp Datapath, log *slog.Logger, d datapath.Direction, shaped bool) {
	if d != datapath.Upload || !shaped || e.state.measured == 0 {
		return
	}
	if err := dp.RaiseUploadRate(e.Ifindex, e.state.measured); err != nil {
		log.Debug("bgudp: upload capacity", "err", err)
	}
}

// linkBytes fills in's AllLanes, the interface's bytes/s of every lane in
// the controlled direction: the link is what every lane's bytes show
// (State.observeLink), and whether the class drives the upload's queue
// (State.drives) compares them with its own. Left 0 where the counter is
// not read.
func (e *episode) linkBytes(dp Datapath, in *Input, d datapath.Direction) {
	sent, received, err := dp.LinkBytes(e.Ifindex)
	now := [2]uint64{datapath.Upload: sent, datapath.Download: received}
	if err != nil {
		now = [2]uint64{}
	}
	if e.counted[d] != 0 && now[d] >= e.counted[d] {
		in.AllLanes = uint64(float64(now[d]-e.counted[d]) / max(in.Dt.Seconds(), 1e-3))
	}
	e.counted = now
}

// yieldOf decides the controlled direction d's yield from the kernel's
// (held: the classifier holds the class, bgclass.h's fg_yield: a harmed
// foreground, a foreground connection's opening, or a present foreground
// with no TCP sample to tell its harm; present: the foreground is
// present): whether the rule holds the rate, and whether it steers to the
// share target (yield.ShareTarget, as LEDBAT++ beside a present
// foreground). Both directions share beside a present, unharmed
// foreground; with off.Arrivals the arrivals are held there instead, as
// the classifier then holds them (CLS_F_HOLD_ARRIVALS).
func yieldOf(d datapath.Direction, held, present bool, off experiments.BgUDPOff) (hold, share bool) {
	if d == datapath.Download && off.Arrivals {
		return held || present, false
	}
	return held, present
}

// peers is the episode's peer first (port 0: its port not known), then
// the remote ends of the interface's background flows (lanes_bg_flows,
// an LRU: flows that ended stay until evicted), at most maxPeers.
func (e *episode) peers(dp Datapath, log *slog.Logger) []netip.AddrPort {
	flows, err := dp.BackgroundFlows()
	if err != nil {
		log.Debug("bgudp: peers", "err", err)
	}
	var out []netip.AddrPort
	for _, f := range flows {
		a := netip.AddrPortFrom(f.Key.Dst.Unmap(), f.Key.DPort)
		if f.Ifindex == e.Ifindex && len(out) < maxPeers && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if !slices.ContainsFunc(out, func(a netip.AddrPort) bool { return a.Addr() == e.Peer }) {
		out = append([]netip.AddrPort{netip.AddrPortFrom(e.Peer, 0)}, out...)
	}
	return out[:min(len(out), maxPeers)]
}

// probeTargets is the step's candidates, of which one is probed: an ICMP
// echo to each peer's address (to one silent to echoes only every
// icmpRetry steps) and, every vnEvery steps, a version probe to each port
// of a peer silent to echoes.
func probeTargets(n int, peers []netip.AddrPort, sig *delaySignal) []netip.AddrPort {
	var out []netip.AddrPort
	for _, pp := range peers {
		echo := netip.AddrPortFrom(pp.Addr(), 0)
		silent := sig.silent(echo)
		if !slices.Contains(out, echo) && (!silent || n%icmpRetry == 0) {
			out = append(out, echo)
		}
		if silent && pp.Port() != 0 && n%vnEvery == 0 {
			out = append(out, pp)
		}
	}
	return out
}

// read takes both directions' counters and the time.
func (e *episode) read(dp Datapath) ([2]datapath.BgClass, time.Time, error) {
	var out [2]datapath.BgClass
	for i, d := range []datapath.Direction{datapath.Upload, datapath.Download} {
		c, err := dp.BgClass(e.Ifindex, d)
		if err != nil {
			return out, time.Time{}, err
		}
		out[i] = c
	}
	return out, time.Now(), nil
}

// snapshotLocked copies the episode's figures (e.mu held).
func (e *episode) snapshotLocked() Episode { return e.Episode }

// probeRoom bounds the probes' bytes (requests and replies) twice:
//   - by the rule's budget (State.ProbeBudget): a bucket of up to
//     probeDepth bytes, filled at the budget, spent by what the prober
//     counted; a probe goes while it is not empty;
//   - by what the class itself moved since the episode began (both
//     directions): a probe goes only if the probes' bytes with it stay
//     within that. A user's background flow of a few bytes cannot make
//     the daemon send more than it sent (14 one-byte datagrams bought
//     258 KB of version probes when only the budget bound them).
//
// The second bound is a running total, not a bucket refilled at the
// budget's pace, and it starts with one IPv4 echo's credit (72 bytes,
// request and reply): the episode's first probe goes in its first step,
// before the flow's window has built a queue, so the base it measures is
// the path's own (without it the ngtcp2 upload's base was taken over a
// standing queue, its probe p95 +34 ms over idle, as without lanes). A
// version probe (2,456 bytes) still waits for the class's own bytes.
type probeRoom struct {
	tokens float64
	seen   uint64 // the prober's bytes at the last refill
	earned uint64 // the class's bytes since the episode began
}

// probeStartCredit is an IPv4 ICMP echo and its reply.
const probeStartCredit = 2 * (20 + 8 + probePayload)

// probeDepth is two version probes and their replies.
const probeDepth = 4 * (vnProbeSize + udpOverhead)

func newProbeRoom() *probeRoom {
	return &probeRoom{tokens: probeDepth, earned: probeStartCredit}
}

// allows says whether a probe of size bytes (request and reply) may go,
// the prober having counted sent bytes so far.
func (r *probeRoom) allows(size int, sent uint64) bool {
	return r.tokens > 0 && sent+uint64(size) <= r.earned
}

// refill adds budget (bytes/s) over dt, takes what the prober's count
// (bytes) grew by since the last refill, and credits the class's bytes
// in the step (moved).
func (r *probeRoom) refill(budget uint64, dt time.Duration, bytes, moved uint64) {
	spent := bytes - min(bytes, r.seen)
	r.seen = bytes
	r.tokens = min(probeDepth, r.tokens+float64(budget)*dt.Seconds()-float64(spent))
	r.earned += moved
}

// probeSize is a probe's bytes to t, request and reply: an ICMP echo
// (port 0) or a version probe.
func probeSize(t netip.AddrPort) int {
	if t.Port() != 0 {
		return 2 * (vnProbeSize + udpOverhead)
	}
	if t.Addr().Unmap().Is6() {
		return 2 * (40 + 8 + probePayload)
	}
	return 2 * (20 + 8 + probePayload)
}

// moved is the class's bytes in both directions between two reads.
func moved(prev, cur [2]datapath.BgClass) uint64 {
	var n uint64
	for i := range 2 {
		n += cur[i].Bytes - min(cur[i].Bytes, prev[i].Bytes)
	}
	return n
}

// markAcks tells the classifier which of the class's directions carry
// only the acknowledgments of its data in the other (want, by direction):
// the yield holds the data's direction, not them (directions apart: a
// download's ACK frames are not held for the upload's harm).
func (e *episode) markAcks(dp Datapath, want [2]bool) {
	for _, d := range []datapath.Direction{datapath.Upload, datapath.Download} {
		if e.acks[d] != want[d] && dp.SetBgAcks(e.Ifindex, d, want[d]) == nil {
			e.acks[d] = want[d]
		}
	}
}

// setYieldRate holds the class at rate (bytes/s) in both directions while
// the yield holds it: the floor's share of the link, never above
// datapath.BgYieldBytes.
func (e *episode) setYieldRate(dp Datapath, rate uint64) {
	if rate == e.yield {
		return
	}
	e.yield = rate
	for _, d := range []datapath.Direction{datapath.Upload, datapath.Download} {
		_ = dp.SetBgYieldRate(e.Ifindex, d, rate)
	}
}
