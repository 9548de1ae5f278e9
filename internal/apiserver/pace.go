// pace.go: unprivileged callers' requests are paced, per uid and in all,
// so that a loop of requests from any number of connections costs the
// daemon a bounded share of a core (an unpaced loop of socket-lanes from 32
// connections took 195 % of two cores). A request over the rate waits, it
// is not refused: a well-behaved client (`lanes monitor` asks a few times a
// sample) never notices. Root alone is not paced: members of the access
// group are (one member's loop made 4,414 requests a second).
//
// A request costs one token per started KiB of its line: the daemon's work
// for a request grows with its size (a socket-lanes request of 2,048
// cookies is about 40 KiB and looks up every cookie), and at one token a
// request, 32 connections of full socket-lanes requests from one uid took
// 72 % of a core and held root's status to 38 ms on average.
package apiserver

import (
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/api"
)

// Request rates of unprivileged callers.
const (
	UserRate      = 200  // requests a second, per uid
	UserBurst     = 400  // requests at once, per uid
	AllUsersRate  = 1000 // requests a second, all uids together
	AllUsersBurst = 2000
	maxPaced      = 1024 // uids whose buckets are kept (the oldest go)
	tokenBytes    = 1024 // a request's line costs a token per started KiB
)

// socketsPerToken: a move-pid costs, after it is done, a token per this
// many sockets it moved. A move of a process holding 19,000 UDP sockets
// cost the daemon 53 ms of CPU with its sockets bounded to 1,024
// (livemove.go): 4 a second took over 20 % of a core; at 128 tokens for
// those 1,024 such moves go at 1.5 a second per uid. A move of a process
// with a few sockets costs what its line does.
const socketsPerToken = 8

// changeCost is what a register, unregister or move-pid costs beyond its
// line: a change reaches the datapath (the daemon computes and applies
// its state again), about 0.6 ms of its CPU where a status costs little.
// An access-group member's register/unregister loop on 8 connections,
// paced at one token a request, kept the daemon at 17.4 % of a core.
const changeCost = 1

// workTime: a request costs, after it is handled, a token per this much
// of its handling and its reply's encoding and writing (wall time, so a
// loaded machine charges more, never less; a caller slow to read pays for
// its own slowness). At UserRate a uid's requests then take at
// most 1 s / workTime / UserRate = 10 % of a core of handling, whatever
// the kind: a udp-flows page beside 19,000 UDP sockets (a dump with
// memory counters, a lookup per flow, ~200 KB of JSON) cost a token at
// first, and one user's loop of them held the daemon at 31.5-37.8 % of a
// core. The charges by line, change and sockets moved stay: they are
// known before, or without, the clock.
const workTime = 500 * time.Microsecond

// workCost is the tokens a request whose handling took took costs.
func workCost(took time.Duration) float64 {
	return float64(took) / float64(workTime)
}

// moveCost is the tokens a move that moved m costs after it was done.
func moveCost(m *api.Moved) float64 {
	if m == nil {
		return 0
	}
	return float64(m.TCP+m.UDP) / socketsPerToken
}

// requestCost is the tokens a request line of n bytes costs.
func requestCost(n int) float64 {
	return float64(max(1, (n+tokenBytes-1)/tokenBytes))
}

// bucket is a token bucket whose tokens may go negative: the debt is the
// wait of the request that made it.
type bucket struct {
	tokens float64
	at     time.Time
}

// take takes cost tokens at rate and burst and returns how long the caller
// must wait for them.
func (b *bucket) take(now time.Time, rate, burst, cost float64) time.Duration {
	if b.at.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	}
	b.at = now
	b.tokens -= cost
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / rate * float64(time.Second))
}

// pacer holds the buckets.
type pacer struct {
	mu    sync.Mutex
	all   bucket
	byUID map[uint32]*bucket
}

// wait is how long uid's next request, of cost tokens, waits.
func (p *pacer) wait(uid uint32, cost float64, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byUID == nil {
		p.byUID = map[uint32]*bucket{}
	}
	b := p.byUID[uid]
	if b == nil {
		if len(p.byUID) >= maxPaced {
			p.forgetOldest()
		}
		b = &bucket{}
		p.byUID[uid] = b
	}
	return max(b.take(now, UserRate, UserBurst, cost), p.all.take(now, AllUsersRate, AllUsersBurst, cost))
}

func (p *pacer) forgetOldest() {
	var oldest uint32
	var at time.Time
	for uid, b := range p.byUID {
		if at.IsZero() || b.at.Before(at) {
			oldest, at = uid, b.at
		}
	}
	delete(p.byUID, oldest)
}
