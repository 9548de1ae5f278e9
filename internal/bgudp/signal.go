// signal.go: the queueing delay from the answers of several targets (a
// peer's ICMP echo, or its UDP port's version probe). Each target has its
// own base (its minimum RTT) and current delay (the minimum of its last
// currentSpan answers); the class's queue is the largest of the targets
// that spoke this step, so one silent or unrelated peer cannot hide the
// queue another peer's path shows. No answer from any target for
// blindSteps leaves no signal: the class is held at the floor.
package bgudp

import (
	"net/netip"
	"time"
)

const (
	currentSpan  = 2  // a target's current delay is the minimum of this many answers
	silentLosses = 20 // lost requests in a row after which a target that answered is silent, not queued
	blindSteps   = 10 // steps without an answer from any target: no signal
	silentSteps  = 6  // steps without an answer after which a target that never answered is silent
)

// peerDelay is one peer's delay filter.
type peerDelay struct {
	base     time.Duration
	recent   []time.Duration
	answered bool
	lossRun  int
	quiet    int // steps since its last answer (or its first request)
}

// delaySignal folds the peers' answers into the step's queue.
type delaySignal struct {
	target  time.Duration
	peers   map[netip.AddrPort]*peerDelay
	quiet   int    // steps since any peer answered
	Lost    uint64 // requests lost, all peers
	Samples uint64 // answers, all peers
}

func newDelaySignal(target time.Duration) *delaySignal {
	return &delaySignal{target: target, peers: map[netip.AddrPort]*peerDelay{}}
}

// step takes the step's per-peer results; it fills in's Signal, Queue,
// Raw (with its Age) and Base, and says whether no peer has answered for
// blindSteps.
func (d *delaySignal) step(res map[netip.AddrPort]peerResult, in *Input) (blind bool) {
	in.Signal, in.Queue, in.Raw, in.Base, in.Spoke, in.Least, in.Age = false, 0, 0, 0, 0, 0, 0
	answered := false
	for a, r := range res {
		p := d.peers[a]
		if p == nil {
			p = &peerDelay{}
			d.peers[a] = p
		}
		d.Lost += uint64(r.lost)
		p.quiet++
		var qd, raw, age time.Duration
		switch {
		case r.rtt > 0:
			d.Samples++
			answered, p.answered, p.lossRun, p.quiet = true, true, 0, 0
			if p.base == 0 || r.rtt < p.base {
				p.base = r.rtt
			}
			p.recent = append(p.recent, r.rtt)
			if len(p.recent) > currentSpan {
				p.recent = p.recent[1:]
			}
			cur := p.recent[0]
			for _, x := range p.recent[1:] {
				cur = min(cur, x)
			}
			qd, raw, age = cur-p.base, r.rtt-p.base, r.age
		case r.lost > 0 && p.answered && p.lossRun < silentLosses:
			// a request lost behind a full queue: read as twice the target
			p.lossRun += r.lost
			qd, raw = 2*d.target, 2*d.target
		default:
			p.lossRun += r.lost
			continue
		}
		if !in.Signal || qd > in.Queue {
			in.Queue, in.Base = qd, p.base
		}
		if !in.Signal || qd < in.Least {
			in.Least = qd
		}
		in.Spoke++
		if !in.Signal || raw > in.Raw {
			in.Raw, in.Age = raw, age
		}
		in.Signal = true
	}
	if answered {
		d.quiet = 0
	} else {
		d.quiet++
	}
	return d.quiet >= blindSteps
}

// silent says whether target t has not answered for long: never in
// silentSteps, or not for silentLosses requests in a row.
func (d *delaySignal) silent(t netip.AddrPort) bool {
	p := d.peers[t]
	return p != nil && (!p.answered && p.quiet >= silentSteps || p.lossRun >= silentLosses)
}
