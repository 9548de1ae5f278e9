// direction.go: one direction of the cooperative caps, built twice by the
// controller: the uploads (cwnd caps) and the downloads (receive-window
// caps). A direction owns what both have in the same shape: the AP's rate
// that way (configured, or its estimator), the safety fallback, the
// interval's goodput and what the interface counted, the group's make-up
// at the last recompute, the caps applied and the setter that applies
// them. What differs between the two (how a flow's demand and the group
// are read, the ACK class, the lanes' default caps) stays with the
// controller (controller.go, downlink.go).
package coop

import (
	"errors"
	"fmt"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

// direction is the uploads' or the downloads' side of the controller.
// Fields under the controller's mu.
type direction struct {
	name           string      // "uploads" or "downloads" (reasons, errors)
	configured     config.Rate // the AP's rate this way; 0: estimated
	est            rateEstimator
	safety         safety
	capOK          bool           // the fallback (own or a peer's) lets caps apply
	capWhy         string         // why not
	arrivals       arrivals       // the interface's byte counts, bounding the goodput
	deliveredBytes float64        // bytes acknowledged (uploads) or received (downloads) since the last tick
	goodput        float64        // this host's, bit/s over the last tick
	judgedGoodput  float64        // the same bounded by the interface's count (arrivals.go)
	groupGood      float64        // the group's goodput at the last tick, bit/s
	groupJudge     float64        // the same, each host's bounded (arrivals.go)
	group          string         // groupKey at the last recompute
	groupHosts     map[uint64]int // the same: host id -> flows
	groupCap       bool           // the same: capping
	applied        map[uint64]uint32
	set            socketCapSetter // nil: caps decided and reported, none applied
	wanted         bool            // the policy asks for these caps (downlink_caps)
	on             bool            // set's switch turned on
	refused        string          // set's switch refused: why (no caps then)
}

// socketCapSetter is a direction's datapath: a per-socket cap and the
// switch that makes the datapath apply such caps.
type socketCapSetter interface {
	setSocketCap(cookie uint64, v uint32) error
	switchCaps(on bool) error
}

// uplinkCaps applies the uploads' cwnd caps; its switch is always on.
type uplinkCaps struct{ UplinkSetter }

func (u uplinkCaps) setSocketCap(ck uint64, segs uint32) error { return u.SetSocketCwndCap(ck, segs) }
func (uplinkCaps) switchCaps(bool) error                       { return nil }

// downlinkCaps applies the downloads' receive-window caps, the
// datapath's callback turned on first.
type downlinkCaps struct{ DownlinkSetter }

func (d downlinkCaps) setSocketCap(ck uint64, b uint32) error { return d.SetSocketRwndCap(ck, b) }
func (d downlinkCaps) switchCaps(on bool) error               { return d.SetDownlinkCaps(on) }

// newDirection builds one direction from the policy's section.
func newDirection(name string, cfg Config, configured config.Rate, wanted bool, rules estimatorRules, back float64, set socketCapSetter) direction {
	return direction{name: name, configured: configured, wanted: wanted,
		est:    newRateEstimator(float64(cfg.Headroom), float64(cfg.MaxAPRate.Bits()), cfg.Interval.D(), rules),
		safety: safety{cfg: cfg.Safety, returningQueueLine: back}, capOK: true, applied: map[uint64]uint32{}, set: set}
}

// newDirections builds the uploads' and the downloads' sides from the
// controller's options.
func newDirections(o Options) (up, down direction) {
	var upSet, downSet socketCapSetter
	if o.Up != nil {
		upSet = uplinkCaps{o.Up}
	}
	if o.Down != nil {
		downSet = downlinkCaps{o.Down}
	}
	cfg := o.Config
	up = newDirection("uploads", cfg, cfg.APRate, true, uplinkRules, upBackInflation, upSet)
	down = newDirection("downloads", cfg, cfg.APDownlinkRate, cfg.DownlinkCaps, downlinkRules, backInflation, downSet)
	return up, down
}

// rate returns the AP's rate this way and where it came from.
func (d *direction) rate(now time.Time) (uint64, string) {
	if d.configured > 0 {
		return d.configured.Bits(), "configured"
	}
	return d.est.rate(now)
}

// estimated reports whether the rate is measured, not configured.
func (d *direction) estimated() bool { return d.configured == 0 }

// closeInterval turns the bytes counted since the last tick into this
// host's goodput over dt seconds (kept when dt is 0).
func (d *direction) closeInterval(dt float64) {
	if dt > 0 {
		d.goodput = d.deliveredBytes * 8 / dt
		d.judgedGoodput = d.arrivals.bound(d.deliveredBytes) * 8 / dt
	}
	d.deliveredBytes = 0
}

// judge feeds one interval to the estimator and the safety fallback,
// follows a counted peer's fallback (peer, when stopped), and restarts the
// estimate while the fallback holds (uncapped intervals measure neither
// the medium nor the caps: estimate.go, restart).
func (d *direction) judge(now time.Time, s groupSample, o observation, peer uint64, stopped bool) {
	d.est.update(now, s)
	if d.estimated() {
		o.drained, o.drainShare, o.drainBack = d.est.drainState()
	}
	d.capOK, d.capWhy = d.safety.update(now, o)
	if d.capOK && stopped {
		d.capOK, d.capWhy = false, fmt.Sprintf("foreign traffic: following peer %016x, which stopped capping its %s", peer, d.name)
	}
	if !d.capOK {
		d.est.restart()
	}
}

// groupChanged records the group's make-up and reports whether caps must
// follow their targets at once. A group that only lost peers to silence
// (in expired: removed within the last 2 x maxDwell, everything else
// unchanged) does not count: on a busy machine a peer's announcements can
// be late by the silence timeout, and it comes back within a few hundred
// ms; then this host's caps grow only after the dwell, so they do not flip
// at all. A peer that says goodbye or stops sending still counts at once.
// With expired nil every change counts (the downlink's rule).
func (d *direction) groupChanged(hosts []HostLoad, capping bool, now time.Time, expired map[uint64]time.Time) bool {
	key := groupKey(hosts, capping)
	if key == d.group {
		return false
	}
	prev, prevKey, prevCap := d.groupHosts, d.group, d.groupCap
	cur := make(map[uint64]int, len(hosts))
	for _, h := range hosts {
		cur[h.ID] = len(h.Flows)
	}
	d.group, d.groupHosts, d.groupCap = key, cur, capping
	if prevKey == "" || prevCap != capping || len(cur) >= len(prev) {
		return true
	}
	for id, n := range cur {
		if pn, ok := prev[id]; !ok || pn != n {
			return true
		}
	}
	for id := range prev {
		if _, ok := cur[id]; ok {
			continue
		}
		if t, ok := expired[id]; !ok || now.Sub(t) > 2*maxDwell {
			return true
		}
	}
	return false
}

// pending returns the caps that differ from those applied.
func (d *direction) pending(caps map[uint64]uint32) map[uint64]uint32 {
	todo := map[uint64]uint32{}
	for ck, v := range caps {
		if old, ok := d.applied[ck]; (ok && old != v) || (!ok && v != 0) {
			todo[ck] = v
		}
	}
	return todo
}

// push applies caps through the setter (outside mu: it may block) and
// returns those applied.
func (d *direction) push(todo map[uint64]uint32) (map[uint64]uint32, []error) {
	var errs []error
	done := map[uint64]uint32{}
	for ck, v := range todo {
		if err := d.set.setSocketCap(ck, v); err != nil {
			errs = append(errs, fmt.Errorf("socket %d (%s): %w", ck, d.name, err))
			continue
		}
		done[ck] = v
	}
	return done, errs
}

// record notes the caps push applied, for the flows that still live.
func (d *direction) record(done map[uint64]uint32, live func(uint64) bool) {
	for ck, v := range done {
		if live(ck) {
			d.applied[ck] = v
		}
	}
}

// wantsSwitch reports whether the setter's switch is still to be turned
// on: a download that connects before it is on never asks for the
// datapath's callback.
func (d *direction) wantsSwitch() bool {
	return d.set != nil && d.wanted && !d.on && d.refused == ""
}

// switchEarly turns the switch on as the controller is made, where the
// caps can apply (cooperative); a refusal is kept, as switched's.
func (d *direction) switchEarly(cooperative bool) error {
	if !cooperative || !d.wantsSwitch() {
		return nil
	}
	err := d.set.switchCaps(true)
	d.switched(err)
	return err
}

// switched records turning the switch on: a refusal is kept, and the
// direction applies no caps then.
func (d *direction) switched(err error) {
	if err != nil {
		d.refused = err.Error()
		return
	}
	d.on = true
}

// shutdown removes every cap applied and turns the switch off.
func (d *direction) shutdown() []error {
	if d.set == nil {
		return nil
	}
	var errs []error
	for ck, v := range d.applied {
		if v != 0 {
			if err := d.set.setSocketCap(ck, 0); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.applied = map[uint64]uint32{}
	if d.on {
		errs = append(errs, d.set.switchCaps(false))
		d.on = false
	}
	return errs
}

// applyError is what a failed apply leaves in status.
func (d *direction) applyError(errs []error) string {
	return fmt.Sprintf("apply caps on %s: %v", d.name, errors.Join(errs...))
}
