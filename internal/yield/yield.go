// Package yield is the foreground-aware yield of the background lane: the
// daemon watches each interface's foreground lanes (interactive and
// realtime) and, while they carry traffic, holds the background sockets
// whose packets leave by that interface at the minimum window (2 segments
// of cwnd, 2 segments of receive window), so the foreground finds the
// bottleneck's queue empty wherever it is; when the foreground goes idle,
// they return to LEDBAT++/rLEDBAT. Per interface: foreground on one
// interface does not hold background on another (another path, another
// bottleneck).
//
// Rule (Detector), on the foreground lanes' egress packet and byte
// counters sampled every Interval:
//   - a sample is active when, since the previous one, the foreground sent
//     at least MinPackets packets or MinBytes bytes (by default 5 packets
//     or 6 KB per 100 ms: 50 packets/s or 480 kbit/s; a ping every 50 ms or
//     a coop announcement is not foreground activity, an interactive
//     transfer's data or ACK clock is);
//   - the yield starts at the first active sample (so within one Interval
//     of the foreground starting, plus the next ACK of each background
//     socket) and ends after Hold without an active sample.
package yield

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Rule parameters; the zero Rule is replaced by DefaultRule.
type Rule struct {
	Interval   time.Duration // sampling period
	MinPackets uint64        // foreground packets per Interval that count as active
	MinBytes   uint64        // or foreground bytes per Interval
	Hold       time.Duration // yield kept this long after the last active sample
}

// DefaultRule is the rule lanes uses.
var DefaultRule = Rule{Interval: 100 * time.Millisecond, MinPackets: 5, MinBytes: 6000, Hold: 500 * time.Millisecond}

// Counters are the foreground lanes' cumulative egress counters, and the
// interface's queue backlog (all lanes) at the sample.
type Counters struct{ Packets, Bytes, Backlog uint64 }

// Detector applies the rule to successive samples of one interface.
type Detector struct {
	rule       Rule
	last       Counters
	have       bool
	lastSample time.Time
	lastActive time.Time
	yielding   bool
	backlog    [10]uint64 // the last samples' backlogs, for MaxBacklog
	n          int
}

// MaxBacklog is the largest device-side backlog of the last 10 samples
// (one second by default): where the queue forms.
func (d *Detector) MaxBacklog() uint64 {
	var m uint64
	for _, b := range d.backlog {
		m = max(m, b)
	}
	return m
}

// NewDetector returns a detector for rule (zero fields from DefaultRule).
func NewDetector(rule Rule) *Detector {
	if rule.Interval == 0 {
		rule.Interval = DefaultRule.Interval
	}
	if rule.MinPackets == 0 {
		rule.MinPackets = DefaultRule.MinPackets
	}
	if rule.MinBytes == 0 {
		rule.MinBytes = DefaultRule.MinBytes
	}
	if rule.Hold == 0 {
		rule.Hold = DefaultRule.Hold
	}
	return &Detector{rule: rule}
}

// Sample feeds the counters read at now and returns whether background
// flows yield.
func (d *Detector) Sample(c Counters, now time.Time) bool {
	if d.have && c.Packets >= d.last.Packets && c.Bytes >= d.last.Bytes {
		dp, db := c.Packets-d.last.Packets, c.Bytes-d.last.Bytes
		// scale to one Interval when sampling ran late
		if dt := now.Sub(d.lastSample); dt > d.rule.Interval {
			dp = dp * uint64(d.rule.Interval) / uint64(dt)
			db = db * uint64(d.rule.Interval) / uint64(dt)
		}
		if dp >= d.rule.MinPackets || db >= d.rule.MinBytes {
			d.lastActive = now
			d.yielding = true
		}
	}
	d.last, d.have, d.lastSample = c, true, now
	d.backlog[d.n%len(d.backlog)] = c.Backlog
	d.n++
	if d.yielding && now.Sub(d.lastActive) >= d.rule.Hold {
		d.yielding = false
	}
	return d.yielding
}

// Iface is one managed interface: its name and ifindex (a device that
// comes back under the same name has a new ifindex, and a new detector).
type Iface struct {
	Name  string
	Index int
}

// Source reads the foreground counters of each managed interface.
type Source func() (map[Iface]Counters, error)

// Sink holds the background sockets of one interface down (true) or lets
// them go.
type Sink func(iface Iface, yield bool) error

// Yielder runs the detectors of every interface and drives the sink, one
// interface at a time.
type Yielder struct {
	rule Rule
	src  Source
	sink Sink

	mu    sync.Mutex
	det   map[Iface]*Detector
	state map[Iface]bool      // yielding (as last told to the sink)
	start map[Iface]time.Time // when its yield started
	on    bool                // some interface yields
	since time.Time
	count uint64 // yields started, all interfaces
}

// New returns a Yielder; Run drives it.
func New(rule Rule, src Source, sink Sink) *Yielder {
	if rule.Interval == 0 {
		rule.Interval = DefaultRule.Interval
	}
	return &Yielder{rule: rule, src: src, sink: sink, det: map[Iface]*Detector{}, state: map[Iface]bool{}, start: map[Iface]time.Time{}}
}

// Run samples until ctx ends; every yield is released when it returns.
func (y *Yielder) Run(ctx context.Context) error {
	t := time.NewTicker(y.rule.Interval)
	defer t.Stop()
	defer y.releaseAll()
	for {
		if err := y.step(time.Now()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type change struct {
	iface Iface
	on    bool
}

func (y *Yielder) step(now time.Time) error {
	c, err := y.src()
	if err != nil {
		return err
	}
	y.mu.Lock()
	var changes []change
	for k, v := range c {
		d := y.det[k]
		if d == nil {
			d = NewDetector(y.rule)
			y.det[k] = d
		}
		on := d.Sample(v, now)
		if on != y.state[k] {
			changes = append(changes, change{k, on})
			if on {
				y.count++
				y.start[k] = now
			}
		}
		y.state[k] = on
	}
	for k, on := range y.state {
		if _, ok := c[k]; !ok { // no longer managed: let its sockets go
			if on {
				changes = append(changes, change{k, false})
			}
			delete(y.state, k)
			delete(y.det, k)
			delete(y.start, k)
		}
	}
	any := slices.Contains(slices.Collect(maps.Values(y.state)), true)
	if any != y.on {
		y.on, y.since = any, now
	}
	y.mu.Unlock()
	var errs []error
	for _, ch := range changes {
		errs = append(errs, y.sink(ch.iface, ch.on))
	}
	return errors.Join(errs...)
}

func (y *Yielder) releaseAll() {
	y.mu.Lock()
	var held []Iface
	for k, on := range y.state {
		if on {
			held = append(held, k)
		}
	}
	y.mu.Unlock()
	for _, k := range held {
		_ = y.sink(k, false)
	}
}

// IfaceStatus is one interface's state in Status.
type IfaceStatus struct {
	Yielding bool      `json:"yielding"`
	Since    time.Time `json:"since,omitzero"` // when its yield started
	// DeviceBacklog is the largest backlog of the interface's lanes qdisc
	// over the last second, bytes: a queue on the device.
	DeviceBacklog uint64 `json:"device_backlog_bytes"`
}

// Status is the component's document (api component op, metrics).
type Status struct {
	Yielding   bool                   `json:"yielding"` // on some interface
	Since      time.Time              `json:"since,omitzero"`
	Yields     uint64                 `json:"yields"` // yields started, all interfaces
	Rule       string                 `json:"rule"`
	Interfaces map[string]IfaceStatus `json:"interfaces"`
}

// Status reports the current state.
func (y *Yielder) Status() Status {
	y.mu.Lock()
	defer y.mu.Unlock()
	s := Status{Yielding: y.on, Since: y.since, Yields: y.count, Rule: y.rule.String(), Interfaces: map[string]IfaceStatus{}}
	for k, v := range y.state {
		is := IfaceStatus{Yielding: v, DeviceBacklog: y.det[k].MaxBacklog()}
		if v {
			is.Since = y.start[k]
		}
		s.Interfaces[k.Name] = is
	}
	return s
}

func (r Rule) String() string {
	r = NewDetector(r).rule
	return "foreground >= " + strconv.FormatUint(r.MinPackets, 10) + " packets or " + strconv.FormatUint(r.MinBytes, 10) + " bytes per " +
		r.Interval.String() + ", held " + r.Hold.String()
}
