// ackclass.go: the rate of the datapath's ACK class, the egress class the
// classifier gives the pure ACKs of this host's interactive sockets while
// downlink caps are cooperative (internal/datapath/ackclass.go). A
// receive-window cap bounds how much a download's sender has in flight,
// not when it sends: the window's data arrives where the download's ACKs
// left in the round before, and the ACK clock keeps that place from the
// first rounds of slow start on (docs/results/coop-downlink.md). ACKs that leave through a token bucket leave spaced, and so does
// the next window.
//
// The class is on once the downlink's estimate cruises (at once where the
// AP's downlink rate is configured): the estimator's pre-start and startup
// read the downloads' unspaced goodput, and a host held by its class in
// the start took a loss's catch-up as its best and settled its caps above
// its peers'. Its rate is
//
//	capped:       max(AckClassFloor, AckClassFactor x ACK bytes per byte received x the capped downloads' window rates)
//	no ratio yet: max(AckClassFloor, AckClassGrowth x what the class sent over the last RTT)
//
// It holds each download's ACKs to 1.3x the rate its window brings
// (a prototype that spaced them at 1.4x the fair share's ACK rate fell short):
// a window that arrives in less than about 3/4 of the round leaves as ACKs
// spread over that much, and the next window with them; a cap raised (a
// probe's 1.2x) raises the rate at once. The ACK bytes per byte received
// are measured over the last 2 s from what the classifier gave the class
// (held or not, so a class that binds does not lower its own rate)
// against what the downloads received; until the first measure the class
// runs at twice what it sent over the last RTT (read from HTB's count, a
// packet leaving the class, so held ACKs are not counted twice). The rate
// is recomputed every fifth of an interval (100 ms with the default
// 500 ms).
//
// No download, no other host downloading, the estimate not cruising, the
// controller not cooperative or the downlink fallen back:
// the class is off (the classifier leaves every ACK in its lane) and
// unrestricted. A datapath without the class (the in-memory one, a tree
// where it could not be made) turns the feature off, reported in the
// downlink's status.
package coop

import (
	"fmt"
	"math"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// AckClassSetter sets the ACK class's rate for the pure ACKs of every interactive socket (bits/s; 0
// off) and reads the bytes the class has sent so far. The daemon backs it
// with internal/datapath.
type AckClassSetter interface {
	SetAckClassEvery(bits uint64) error
	AckClassSent() (uint64, error)
	// AckClassBytes: the bytes the classifier has given the class (what
	// arrives at it, held or not)
	AckClassBytes() (uint64, error)
}

const (
	// AckClassGrowth is the class's rate over what it sent in the last RTT:
	// slow start's growth per round.
	AckClassGrowth = 2.0
	// AckClassFloor is the class's lowest rate, bits/s: an initial window's
	// ACKs (10 of 52-66 bytes) within 0.15 s.
	AckClassFloor = 32_000
	// ackChange is the relative change of the wanted rate that is applied
	// (smaller ones are not worth a netlink change).
	ackChange = 0.03
	// AckClassFactor is the class's rate over the capped downloads' ACK
	// rate at their window rates (which are 1.0-1.1x their goodput): above
	// the estimator's probes (1.2x); a prototype spaced the ACKs at 1.4x
	// the fair share's ACK rate (Jain 0.991-0.993 at 16 downloads).
	AckClassFactor = 1.3
	// ackRatioSpan is the span over which the ACK bytes per byte received
	// are measured; ackRatioMinRecv the bytes received it needs.
	ackRatioSpan    = 2 * time.Second
	ackRatioMinRecv = 64 << 10
	// ackRatioMin, ackRatioMax bound the ratio (one 40-byte ACK per 64 KB
	// GSO aggregate; one 100-byte ACK per 536-byte segment, x1.3).
	ackRatioMin, ackRatioMax = 0.0005, 0.25
	// ackRTTDefault is the RTT before any download's is known; the window
	// is bounded by ackRTTMin and ackRTTMax.
	ackRTTDefault = 300 * time.Millisecond
	ackRTTMin     = 100 * time.Millisecond
	ackRTTMax     = time.Second
)

type ackSent struct {
	at    time.Time
	bytes uint64 // the class's sent bytes
	given uint64 // the bytes the classifier gave it
	recv  uint64 // the downloads' received bytes
}

// ackState is the ACK class's controller state. Fields under the
// controller's mu.
type ackState struct {
	set     AckClassSetter // nil: the datapath has no ACK class
	on      bool           // downloads to space (the last step's judgement)
	windows float64        // the capped downloads' window rates, bits/s (0: none capped)
	rtt     time.Duration
	recv    uint64    // bytes the ACK-lane downloads received, ever (merge)
	hist    []ackSent // the class's sent bytes, the last ackRatioSpan and a step
	ratio   float64   // ACK bytes sent per byte received over ackRatioSpan (0: not yet)
	sent    float64   // bits/s the class sent over the last rtt
	want    uint64    // rate wanted, bits/s (0: off)
	applied uint64    // rate applied, bits/s (0: off)
	refused string    // why the datapath cannot have the class
	changes uint64
}

// AckClassStatus is the ACK class in the downlink's status.
type AckClassStatus struct {
	On       bool   `json:"on"`
	RateBits uint64 `json:"rate_bits"` // applied; 0: off (unrestricted)
	SentBits uint64 `json:"sent_bits"` // what it sent over the last RTT, bits/s
	// the capped downloads' window rates (bits/s, 0: none capped) and the
	// ACK bytes sent per byte received
	WindowsBits uint64  `json:"windows_bits"`
	Ratio       float64 `json:"ack_ratio"`
	RTTms       float64 `json:"rtt_ms"` // the window of SentBits
	Changes     uint64  `json:"changes"`
	Reason      string  `json:"reason,omitempty"` // why off
}

// AckClassRate is the ACK class's rate, bits/s, before any cap: twice
// what it sent over the last RTT (bits/s), at least the floor.
func AckClassRate(sentBits float64) uint64 {
	r := AckClassGrowth * sentBits
	if math.IsNaN(r) || r < AckClassFloor {
		r = AckClassFloor
	}
	return uint64(min(math.Ceil(r), math.MaxUint32))
}

// AckClassCappedRate is the ACK class's rate, bits/s, with downloads
// capped: AckClassFactor x the ACK bytes per byte received x the capped
// downloads' window rates (bits/s, summed), at least the floor.
func AckClassCappedRate(windowsBits, ratio float64) uint64 {
	r := AckClassFactor * ratio * windowsBits
	if math.IsNaN(r) || r < AckClassFloor {
		r = AckClassFloor
	}
	return uint64(min(math.Ceil(r), math.MaxUint32))
}

// WindowBits is a capped download's window rate: cap x 8 / rtt (0 without
// a cap or an RTT).
func WindowBits(capBytes uint32, rtt time.Duration) float64 {
	if capBytes == 0 || rtt <= 0 {
		return 0
	}
	return float64(capBytes) * 8 / rtt.Seconds()
}

// ackLane says whether a download's ACKs can be the class's: the
// classifier takes only interactive sockets' (a socket without a lane is
// interactive); realtime ACKs keep their priority, background ones theirs.
func ackLane(l lane.Lane) bool { return l != lane.Realtime && l != lane.Background }

// ackJudge says whether the class should be on (downloads in an
// interactive lane, another host downloading through the AP (a host alone
// keeps its slow start whole), downlink caps cooperative, on in the
// datapath and not fallen back: where the kernel cannot clamp a window, 5.10, the class
// stays off), the RTT of its window (the largest of the downloads') and
// the capped downloads' window rates; downN is the downlink group's size.
// Caller holds mu.
func (a *ackState) judge(cfg config.Coop, down *direction, flows map[uint64]*flowState, downN int) {
	a.on, a.rtt, a.windows = false, 0, 0
	if !cfg.DownlinkCaps || !cfg.Cooperative || !down.capsSwitchedOn() || !down.capsAllowed() || a.refused != "" || downN < 2 ||
		down.estimateBeforeCruise() {
		return
	}
	a.windows = 0
	for _, fs := range flows {
		if fs.dn.active && ackLane(fs.f.Lane) {
			a.on = true
			a.rtt = max(a.rtt, fs.f.RcvRTT, fs.downRTT())
			a.windows += WindowBits(fs.dn.cap, fs.downRTT())
		}
	}
	if a.rtt <= 0 {
		a.rtt = ackRTTDefault
	}
	a.rtt = min(max(a.rtt, ackRTTMin), ackRTTMax)
}

// status is the ACK class in the downlink's status. Caller holds mu.
func (a *ackState) status() *AckClassStatus {
	st := &AckClassStatus{On: a.applied > 0, RateBits: a.applied, SentBits: uint64(a.sent),
		WindowsBits: uint64(a.windows), Ratio: a.ratio,
		RTTms: float64(a.rtt) / float64(time.Millisecond), Changes: a.changes, Reason: a.refused}
	if st.Reason == "" && !st.On {
		st.Reason = "no downloads"
	}
	return st
}

// stepAck reads what the class sent, computes its rate and applies it
// (outside mu: netlink may block).
func (c *Controller) stepAck() {
	as := c.ack.set
	if as == nil {
		c.mu.Lock()
		if c.ack.refused == "" && c.cfg.DownlinkCaps {
			c.ack.refused = "the datapath has no ACK class"
		}
		c.mu.Unlock()
		return
	}
	n, nerr := as.AckClassSent()
	g, gerr := as.AckClassBytes()
	c.mu.Lock()
	a := &c.ack
	now := c.now()
	a.judge(c.cfg, &c.down, c.flows, c.st.Down.N)
	switch {
	case !a.on || nerr != nil || gerr != nil:
		a.hist, a.sent, a.want = a.hist[:0], 0, 0
	default:
		if l := len(a.hist) - 1; l >= 0 && (n < a.hist[l].bytes || g < a.hist[l].given || a.recv < a.hist[l].recv) { // a tree replaced
			a.hist = a.hist[:0]
		}
		a.hist = append(a.hist, ackSent{now, n, g, a.recv})
		// keep one sample at or before now - ackRatioSpan
		k := 0
		for k+1 < len(a.hist) && !a.hist[k+1].at.After(now.Add(-ackRatioSpan)) {
			k++
		}
		a.hist = a.hist[k:]
		// what it sent over the last rtt, and per byte received over the span
		a.sent = 0
		j := len(a.hist) - 1
		for j > 0 && now.Sub(a.hist[j].at) < a.rtt {
			j--
		}
		if h := a.hist[j]; now.Sub(h.at) >= ackRTTMin/2 {
			a.sent = float64(n-h.bytes) * 8 / now.Sub(h.at).Seconds()
		}
		// (what the classifier gave it: a class that holds ACKs back does
		// not lower its own rate)
		if h := a.hist[0]; a.recv-h.recv >= ackRatioMinRecv {
			a.ratio = min(max(float64(g-h.given)/float64(a.recv-h.recv), ackRatioMin), ackRatioMax)
		}
		if a.windows > 0 && a.ratio > 0 {
			a.want = AckClassCappedRate(a.windows, a.ratio)
		} else {
			a.want = AckClassRate(a.sent)
		}
	}
	want, applied := a.want, a.applied
	c.mu.Unlock()
	if want == applied || (want > 0 && applied > 0 && math.Abs(float64(want)-float64(applied)) < ackChange*float64(applied)) {
		return
	}
	err := as.SetAckClassEvery(want)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		a.refused = err.Error()
		a.applied = 0
		c.cnt.ApplyErrors++
		c.st.LastError = fmt.Sprintf("ACK class: %v", err)
		c.log.Warn("coop: ACK class off", "err", err)
		return
	}
	a.applied = want
	a.changes++
}

// shutdown turns the ACK class off. Caller holds mu.
func (a *ackState) shutdown() error {
	if a.set == nil || a.applied == 0 {
		return nil
	}
	a.applied = 0
	return a.set.SetAckClassEvery(0)
}
