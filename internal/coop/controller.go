// controller.go: the cooperative controller that runs inside the daemon.
//
// Every interval it samples this host's uplink flows (FlowSource), broadcasts
// an announcement (Transport), and recomputes the caps of its own flows from
// its peers' announcements; caps reach sockets through the setters the
// daemon passes in (the datapath's sock_ops map, applied with
// TCP_BPF_SNDCWND_CLAMP). The two directions, uploads and downloads, are
// one type built twice (direction.go). A receive
// loop authenticates and replay-checks incoming announcements; a peer joining,
// leaving or starting/stopping to send triggers an immediate recomputation,
// so caps follow within one interval of the event (a silent crash is noticed
// after SilenceIntervals). Local flows are also sampled five times per
// interval: a flow that starts sending is announced at once, so the group
// caps a newcomer before its slow start overshoots.
//
// Caps of a flow = min(cooperative cap, matching rule caps). The cooperative
// cap is off while the rate is unknown or the safety fallback holds; rule
// caps (per application / lane policy, seeds §002) always apply.
//
// Note: only active flows (data waiting or acknowledged since the last
// sample) count as senders and get a new cooperative cap; an idle flow keeps
// the cap it had, so a flow pausing for a moment does not flap.
package coop

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// Flow is one local uplink TCP connection, as sampled by the TCP monitor.
type Flow struct {
	Cookie     uint64
	Lane       lane.Lane
	App        string // application or policy rule that classified the flow
	MSS        uint32 // bytes
	Cwnd       uint32 // segments
	CAState    uint8
	SRTT       time.Duration
	MinRTT     time.Duration
	RcvRTT     time.Duration // receive-side RTT estimate (downloads; 0 = none)
	NotSent    uint64        // bytes in the socket not yet sent
	InFlight   uint64        // bytes sent, not yet acknowledged
	BytesAcked uint64        // cumulative
	BytesRecv  uint64        // cumulative, received (downloads)
	Retrans    uint32        // cumulative retransmitted segments
}

// FlowSource returns this host's uplink flows (through the managed
// interface). The daemon backs it with internal/tcpmon.
type FlowSource interface {
	UplinkFlows(ctx context.Context) ([]Flow, error)
}

// UplinkSetter applies the uploads' caps: a socket's cwnd cap and the cap
// new connections of a lane get at establishment (segments; 0 removes
// the cap). The daemon backs it with internal/datapath.
type UplinkSetter interface {
	SetSocketCwndCap(cookie uint64, segs uint32) error
	SetLaneCwndCap(l lane.Lane, segs uint32) error
}

// Transport carries announcements: broadcast send, receive with source.
type Transport interface {
	Send(b []byte) error
	Recv(b []byte) (int, netip.Addr, error)
	Close() error
}

// reopener is a Transport that may have a family left to open
// (UDPTransport: its port was held, its address not there yet).
type reopener interface {
	Reopen() bool
	Missing() string
}

// Options are a Controller's parts; Flows is required. A nil setter:
// that part's caps are computed and reported, none applied.
type Options struct {
	Config Config
	Flows  FlowSource
	Up     UplinkSetter   // the uploads' cwnd caps
	Down   DownlinkSetter // the downloads' receive-window caps
	Ack    AckClassSetter // the downloads' ACK class (ackclass.go)
	// Iface: the managed interface's byte counters, which bound the
	// goodput the safety fallback judges by (arrivals.go); nil: unbounded
	Iface     IfaceCounter
	Transport Transport // nil: UDP broadcast on Config.Interface
	HostID    uint64    // 0: derived from machine-id and the interface
	Logger    *slog.Logger
	Now       func() time.Time // for tests
}

// Counters count announcements by fate.
type Counters struct {
	Sent            uint64 `json:"sent"`
	SendErrors      uint64 `json:"send_errors"`
	Received        uint64 `json:"received"`
	Accepted        uint64 `json:"accepted"`
	Own             uint64 `json:"own"`
	Malformed       uint64 `json:"malformed"`
	Oversized       uint64 `json:"oversized"`
	BadVersion      uint64 `json:"bad_version"`
	Unauthenticated uint64 `json:"unauthenticated"`
	Forged          uint64 `json:"forged"`
	Replayed        uint64 `json:"replayed"`
	Stale           uint64 `json:"stale"`
	TableFull       uint64 `json:"table_full"`
	PeerRate        uint64 `json:"peer_rate_limited"`
	AddrConflict    uint64 `json:"addr_conflict"`
	Duplicates      uint64 `json:"duplicates"`       // second copies (IPv4 and IPv6), not drops
	Late            uint64 `json:"late"`             // older than the latest, never seen (reordered across families): not applied, not drops
	NotPeer         uint64 `json:"goodbye_not_peer"` // goodbyes naming no peer, or not believed without a key
	SeqJumps        uint64 `json:"seq_jump_held"`    // keyless: more than maxSeqGap past the host's latest, held (peers.go)
	ApplyErrors     uint64 `json:"apply_errors"`
	CapChanges      uint64 `json:"cap_changes"`      // changes of any flow's applied cap
	DownCapChanges  uint64 `json:"down_cap_changes"` // changes of any flow's downlink cap
}

// Dropped is the total of announcements refused.
func (c Counters) Dropped() uint64 {
	return c.Malformed + c.Oversized + c.BadVersion + c.Unauthenticated + c.Forged + c.Replayed + c.Stale +
		c.TableFull + c.PeerRate + c.AddrConflict + c.NotPeer + c.SeqJumps
}

// PeerStatus is one peer in Status.
type PeerStatus struct {
	ID          string    `json:"id"`
	Addr        string    `json:"addr"`
	Active      bool      `json:"active"`
	Flows       int       `json:"flows"`
	Waiting     uint64    `json:"bytes_waiting"`
	GoodputBits uint64    `json:"goodput_bits"`
	LaneMix     [3]uint16 `json:"lane_mix"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	Share       float64   `json:"share"`
	// downlink: the peer's active downloads and downlink goodput
	DownFlows       int    `json:"down_flows"`
	DownGoodputBits uint64 `json:"down_goodput_bits"`
	// Counted: the peer counts in N (without a key, peers are admitted into
	// N one at a time and up to a bound).
	Counted bool `json:"counted"`
	// UpStopped, DownStopped: the peer announces that its fallback stopped
	// its upload / download caps (this host follows it).
	UpStopped   bool `json:"up_stopped,omitempty"`
	DownStopped bool `json:"down_stopped,omitempty"`
}

// FlowStatus is one local flow and its cap in Status.
type FlowStatus struct {
	Cookie  uint64  `json:"cookie"`
	Lane    string  `json:"lane"`
	App     string  `json:"app,omitempty"`
	Active  bool    `json:"active"`
	MinRTT  float64 `json:"min_rtt_ms"`
	MSS     uint32  `json:"mss"`
	Cwnd    uint32  `json:"cwnd"`
	Waiting uint64  `json:"bytes_waiting"`
	Coop    uint32  `json:"coop_cap"`
	Rule    string  `json:"rule,omitempty"`
	Cap     uint32  `json:"cap"` // applied: min(coop, rule), 0 = none
	// CapChanges counts changes of Cap since the flow was first seen;
	// CapHistory holds the latest ones (oldest first), so a reader can tell
	// which cap was in force at a given time.
	CapChanges uint64      `json:"cap_changes"`
	CapHistory []CapChange `json:"cap_history,omitempty"`
	// The downlink side: receiving now, receive rate, the window cap
	// (bytes, 0 = none) and its changes, as for the uplink cap.
	DownActive     bool        `json:"down_active"`
	RecvBits       uint64      `json:"recv_bits"`
	DownCap        uint32      `json:"down_cap_bytes"`
	DownCapChanges uint64      `json:"down_cap_changes"`
	DownCapHistory []CapChange `json:"down_cap_history,omitempty"`
}

// CapChange is one change of a flow's applied cap.
type CapChange struct {
	At  time.Time `json:"at"`
	Cap uint32    `json:"cap"`
}

// capHistoryLen is how many cap changes a flow's status keeps.
const capHistoryLen = 32

// Status is the controller's state for `lanes status` / the API.
type Status struct {
	Enabled       bool   `json:"enabled"`
	HostID        string `json:"host_id"`
	Authenticated bool   `json:"authenticated"`
	Trust         string `json:"trust"`                     // "authenticated" or "unauthenticated"
	Uncounted     int    `json:"uncounted_peers,omitempty"` // active peers not (yet) in N (keyless limit)
	Warning       string `json:"warning,omitempty"`
	// TransportMissing: a family (IPv4, IPv6) that could not be opened
	// and why; tried again each interval.
	TransportMissing string            `json:"transport_missing,omitempty"`
	N                int               `json:"n"` // active senders including this host
	SelfActive       bool              `json:"self_active"`
	Peers            []PeerStatus      `json:"peers"`
	RateBits         uint64            `json:"rate_bits"`
	RateSource       string            `json:"rate_source"`        // configured, estimated, unknown
	Estimate         *EstimateStatus   `json:"estimate,omitempty"` // the estimator's state, when not configured
	Capping          bool              `json:"capping"`
	Reason           string            `json:"reason,omitempty"` // why capping is off
	SelfShare        float64           `json:"self_share"`
	GoodputBits      uint64            `json:"goodput_bits"`
	Flows            []FlowStatus      `json:"flows"`
	Down             DownStatus        `json:"downlink"`
	LaneCaps         map[string]uint32 `json:"lane_caps"`
	Counters         Counters          `json:"counters"`
	LastError        string            `json:"last_error,omitempty"`
	Updated          time.Time         `json:"updated"`
}

// flowState is one local flow: its upload side here (the cwnd cap, in
// segments), its download side in dn (the window cap, in bytes).
type flowState struct {
	f            Flow
	active       bool
	lastProgress time.Time
	flowCap
	rule string    // rule that set the cap, if any
	dn   downState // the downlink side (downlink.go)
}

// flowCap is one direction's cap of a flow: the cooperative cap (kept
// while the flow is idle), its hysteresis, and the cap applied with its
// changes.
type flowCap struct {
	coop    uint32 // cooperative cap, segments
	filt    capFilter
	cap     uint32      // applied: segments up, bytes down
	changes uint64      // changes of cap
	history []CapChange // latest changes of cap
}

// setCap records the flow's applied cap, counting and remembering changes.
func (fc *flowCap) setCap(v uint32, now time.Time) bool {
	if v == fc.cap {
		return false
	}
	fc.cap = v
	fc.changes++
	fc.history = append(fc.history, CapChange{At: now, Cap: v})
	if len(fc.history) > capHistoryLen {
		fc.history = fc.history[len(fc.history)-capHistoryLen:]
	}
	return true
}

type rateSample struct {
	t    time.Time
	bits float64
	// judged: the interval's group goodput bounded by what the hosts'
	// interfaces counted (arrivals.go), at most bits
	judged float64
}

// Controller is the cooperative controller. Create with New, then Run.
type Controller struct {
	cfg     Config
	key     []byte
	hostID  uint64
	flowsrc FlowSource
	iface   IfaceCounter
	tr      Transport
	log     *slog.Logger
	now     func() time.Time
	changed chan struct{}

	mu         sync.Mutex
	seq        uint64
	table      *Table
	cnt        Counters
	flows      map[uint64]*flowState
	lastSample time.Time            // last tick's sample
	up         direction            // the uploads: cwnd caps
	down       direction            // the downloads: receive-window caps (downlink.go)
	lanes      laneDefaults         // the lanes' caps for new connections
	expired    map[uint64]time.Time // peers removed for silence, when
	counted    map[uint64]bool      // keyless mode: peers admitted into N
	lastCount  time.Time            // keyless mode: when the last peer was admitted into N
	lastSave   time.Time            // replay state written
	saveDirty  bool                 // announcements accepted since
	ack        ackState             // the downloads' ACK class (ackclass.go)
	st         Status
	closeOnce  sync.Once
}

// New builds a controller; it opens the UDP transport unless one is given.
func New(o Options) (*Controller, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("coop config: %w", err)
	}
	if o.Flows == nil {
		return nil, errors.New("coop: no flow source")
	}
	key, err := o.Config.LoadKey()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: o.Config, key: key, hostID: o.HostID, flowsrc: o.Flows, iface: o.Iface,
		tr: o.Transport, log: o.Logger, now: o.Now, changed: make(chan struct{}, 1),
		flows: map[uint64]*flowState{}, lanes: laneDefaults{set: o.Up, applied: map[lane.Lane]uint32{}},
		ack: ackState{set: o.Ack}}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.hostID == 0 {
		c.hostID = DeriveHostID(o.Config.Interface)
	}
	if c.tr == nil {
		if o.Config.Interface == "" {
			return nil, errors.New("coop: no interface to announce on")
		}
		t, err := ListenUDPOn(o.Config.Interface, o.Config.Port, o.Config.Transport)
		if err != nil {
			return nil, err
		}
		if t.Warning != "" {
			c.log.Warn("coop: one transport could not be opened, using the other", "err", t.Warning)
		}
		var uni []netip.Addr
		for _, a := range o.Config.UnicastPeers {
			uni = append(uni, netip.MustParseAddr(a)) // validated
		}
		t.SetUnicast(uni)
		c.tr = t
	}
	c.seq = uint64(c.now().UnixNano())
	iv := o.Config.Interval.D()
	c.table = NewTable(iv, o.Config.SilenceIntervals, o.Config.MaxClockSkew.D())
	c.table.SetLimits(Limits{MaxPeers: o.Config.MaxPeers, NewRate: o.Config.NewPeerRate,
		Burst: o.Config.NewPeerBurst, OnePerAddr: key == nil, Keyless: key == nil})
	c.counted = map[uint64]bool{}
	rs, err := loadReplay(o.Config.StateFile, c.now(), o.Config.MaxClockSkew.D())
	if err != nil {
		c.log.Warn("coop: replay state unreadable, starting as after a crash", "err", err)
	}
	c.table.restored = rs
	if err := c.saveState(false); err != nil { // a crash from here on is unclean
		c.log.Warn("coop: cannot write replay state", "file", o.Config.StateFile, "err", err)
	}
	c.up, c.down = newDirections(o)
	// the downlink's callback on before the daemon answers its API: a
	// download that connects before it is on never asks for the callback
	// (sockets ask at establishment, and a pure receiver gets no later RTT
	// callback to ask at), so its cap would never act
	// (TestCoopThreeDaemonsDownlink failed so once in 50 runs, the
	// component's first tick late on a loaded machine)
	if err := c.down.switchEarly(o.Config.Cooperative); err != nil {
		c.log.Warn("coop: downlink caps cannot be applied", "err", err)
	}
	c.st = Status{Enabled: true, HostID: fmt.Sprintf("%016x", c.hostID), Authenticated: key != nil, Trust: "authenticated"}
	if key == nil {
		c.st.Trust = "unauthenticated"
		c.st.Warning = fmt.Sprintf("no group key configured: peer announcements are UNAUTHENTICATED; "+
			"limited mode: one host id per address, at most %d peers count in N, admitted one per %v",
			o.Config.KeylessMaxPeers, o.Config.KeylessGrowth)
		c.log.Warn("coop: " + c.st.Warning)
	}
	return c, nil
}

// HostID is this host's id in announcements.
func (c *Controller) HostID() uint64 { return c.hostID }

// Run announces, listens and caps until ctx ends; then it says goodbye and
// removes every cap it set.
func (c *Controller) Run(ctx context.Context) error {
	rxDone := make(chan struct{})
	go func() { defer close(rxDone); c.recvLoop(ctx) }()
	iv := c.cfg.Interval.D()
	tick := time.NewTicker(iv)
	defer tick.Stop()
	exp := time.NewTicker(iv / 5)
	defer exp.Stop()
	c.tick(ctx)
	for {
		select {
		case <-ctx.Done():
			err := c.shutdown()
			<-rxDone
			return err
		case <-tick.C:
			c.tick(ctx)
			c.stepAck()
		case <-exp.C:
			// between announcements: expire silent peers, and announce at
			// once when a local flow starts sending (a join is not left
			// waiting for the next interval)
			joined := c.sampleFlows(ctx)
			if joined {
				c.announce()
			}
			c.mu.Lock()
			gone := c.expire(c.now())
			raising := c.raising()
			c.mu.Unlock()
			if len(gone) > 0 {
				c.log.Info("coop: peers silent, removed", "n", len(gone))
			}
			if joined || len(gone) > 0 || raising {
				c.recomputeAndApply()
			}
			c.stepAck()
		case <-c.changed:
			c.recomputeAndApply()
		}
	}
}

// Close releases the transport (Run calls it on exit).
func (c *Controller) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.tr.Close() })
	return err
}

func (c *Controller) shutdown() error {
	c.mu.Lock()
	c.seq++
	a := Announcement{HostID: c.hostID, Seq: c.seq, Time: c.now(), Interval: c.cfg.Interval.D(), Leaving: true}
	c.mu.Unlock()
	_ = c.tr.Send(Encode(&a, c.key))
	var errs []error
	c.mu.Lock()
	errs = append(errs, c.up.shutdown()...)
	errs = append(errs, c.lanes.shutdown()...)
	errs = append(errs, c.ack.shutdown())
	errs = append(errs, c.down.shutdown()...)
	errs = append(errs, c.saveState(true))
	c.mu.Unlock()
	errs = append(errs, c.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("coop shutdown: %w", err)
	}
	return nil
}

func (c *Controller) recvLoop(ctx context.Context) {
	buf := make([]byte, 2*MaxSize)
	for {
		n, from, err := c.tr.Recv(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			c.log.Debug("coop: receive", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c.Handle(buf[:n], from)
	}
}

// Handle processes one received datagram (exported for tests and tools).
// It returns nil when the announcement was accepted.
func (c *Controller) Handle(b []byte, from netip.Addr) error {
	a, err := Decode(b, c.key)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cnt.Received++
	if err == nil && a.HostID == c.hostID {
		c.cnt.Own++
		return ErrOwn
	}
	var ch Change
	if err == nil {
		ch, err = c.table.Accept(a, from, c.now())
	}
	switch {
	case err == nil:
		c.cnt.Accepted++
	case errors.Is(err, ErrOversized):
		c.cnt.Oversized++
	case errors.Is(err, ErrVersion):
		c.cnt.BadVersion++
	case errors.Is(err, ErrUnauthenticated):
		c.cnt.Unauthenticated++
	case errors.Is(err, ErrForged):
		c.cnt.Forged++
	case errors.Is(err, ErrReplayed):
		c.cnt.Replayed++
	case errors.Is(err, ErrStale):
		c.cnt.Stale++
	case errors.Is(err, ErrTableFull):
		c.cnt.TableFull++
	case errors.Is(err, ErrPeerRate):
		c.cnt.PeerRate++
	case errors.Is(err, ErrAddrConflict):
		c.cnt.AddrConflict++
	case errors.Is(err, ErrDuplicate):
		c.cnt.Duplicates++
	case errors.Is(err, ErrNotPeer):
		c.cnt.NotPeer++
	case errors.Is(err, ErrLate):
		c.cnt.Late++
	case errors.Is(err, ErrSeqJump):
		c.cnt.SeqJumps++
	default:
		c.cnt.Malformed++
	}
	if err != nil {
		return err
	}
	c.saveDirty = true
	if ch == Joined { // a new peer's sequence is on disk before it matters
		c.saveStateLogged(false)
	}
	if ch != Updated {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// tick closes an interval: it samples local flows and the interface,
// announces them, judges the interval and recomputes caps.
func (c *Controller) tick(ctx context.Context) {
	c.sampleInterval(ctx)
	c.announce()
	c.judgeAndApply()
	c.mu.Lock()
	if c.saveDirty && c.now().Sub(c.lastSave) >= saveEvery {
		c.saveStateLogged(false)
	}
	c.mu.Unlock()
}

// saveState writes the replay state (persist.go). Caller holds mu (or is New).
func (c *Controller) saveState(clean bool) error {
	now := c.now()
	c.lastSave, c.saveDirty = now, false
	return saveReplay(c.cfg.StateFile, replayFile{Saved: now, Clean: clean, Peers: c.table.replayEntries(now)})
}

func (c *Controller) saveStateLogged(clean bool) {
	if err := c.saveState(clean); err != nil {
		c.st.LastError = fmt.Sprintf("save replay state: %v", err)
	}
}

// sampleFlows takes a flow sample between ticks; it reports whether a
// local flow started sending.
func (c *Controller) sampleFlows(ctx context.Context) bool {
	flows, err := c.flowsrc.UplinkFlows(ctx)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.st.LastError = fmt.Sprintf("flow source: %v", err)
		return false
	}
	return c.merge(flows, now)
}

// sampleInterval takes a tick's sample, the flows and the interface's
// counters (a flow source that fails reads as no flows), and closes the
// interval's measurements.
func (c *Controller) sampleInterval(ctx context.Context) {
	flows, err := c.flowsrc.UplinkFlows(ctx)
	var rx, tx uint64
	var ierr error
	if c.iface != nil {
		rx, tx, ierr = c.iface.InterfaceBytes()
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.iface != nil {
		c.down.arrivals.observe(rx, ierr)
		c.up.arrivals.observe(tx, ierr)
	}
	if err != nil {
		c.st.LastError = fmt.Sprintf("flow source: %v", err)
		flows = nil
	}
	c.merge(flows, now)
	c.closeInterval(now)
}

// announce sends this host's announcement now.
func (c *Controller) announce() {
	if r, ok := c.tr.(reopener); ok {
		if r.Reopen() {
			c.log.Info("coop: a transport family that could not be opened is open now", "still_missing", r.Missing())
		}
		c.mu.Lock()
		c.st.TransportMissing = r.Missing()
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.seq++
	a := c.ownAnnouncement(c.now())
	c.mu.Unlock()
	err := c.tr.Send(Encode(&a, c.key))
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.cnt.SendErrors++
		c.st.LastError = fmt.Sprintf("send announcement: %v", err)
		return
	}
	c.cnt.Sent++
}

// merge takes a new flow sample. A flow is active while it has data
// waiting or made progress within the last interval. It reports whether a
// flow became active. Caller holds mu.
func (c *Controller) merge(flows []Flow, now time.Time) bool {
	iv := c.cfg.Interval.D()
	joined := false
	seen := make(map[uint64]bool, len(flows))
	for _, f := range flows {
		seen[f.Cookie] = true
		fs, ok := c.flows[f.Cookie]
		var prev Flow
		if ok {
			prev = fs.f
		}
		if ok && f.BytesAcked > fs.f.BytesAcked {
			c.up.deliveredBytes += float64(f.BytesAcked - fs.f.BytesAcked)
			fs.lastProgress = now
		}
		if !ok {
			fs = &flowState{}
			c.flows[f.Cookie] = fs
		}
		fs.f = f
		was := fs.active
		fs.active = f.NotSent+f.InFlight > 0 || (!fs.lastProgress.IsZero() && now.Sub(fs.lastProgress) < iv)
		if fs.active && !was {
			joined = true
		}
		recv, started := fs.sampleDown(prev, ok, now, iv)
		c.down.deliveredBytes += recv
		if ackLane(f.Lane) {
			c.ack.recv += uint64(recv)
		}
		if started {
			joined = true
		}
	}
	for ck := range c.flows {
		if !seen[ck] {
			delete(c.flows, ck)
			delete(c.up.applied, ck)
			delete(c.down.applied, ck)
		}
	}
	return joined
}

// closeInterval computes the goodput of the interval since the last tick,
// this host's and the group's, each way; the downlink's interval is
// judged here (tickDown), the uplink's after the announcement (observe).
// Caller holds mu.
func (c *Controller) closeInterval(now time.Time) {
	dt := 0.0
	if !c.lastSample.IsZero() {
		dt = now.Sub(c.lastSample).Seconds()
	}
	c.up.closeInterval(dt)
	c.tickDown(now, dt)
	c.lastSample = now
	// the group's goodput feeds the AP rate estimate
	c.up.groupGood, c.up.groupJudge = c.groupGoodput(&c.up, func(p *Peer) (float64, float64, uint8) {
		return peerGoodput(p, c.cfg.MaxAPRate), float64(p.Last.GoodputKbit) * 1000, p.Last.GoodputOver
	})
}

// groupGoodput is this host's goodput one way plus the counted peers'
// (keyless: only peers counted in N count in the rate), as read (bounded)
// and judged (each peer's announced goodput less what it announced its
// interface's count took off). Caller holds mu.
func (c *Controller) groupGoodput(d *direction, peer func(*Peer) (read, announced float64, over uint8)) (float64, float64) {
	g, gj := d.goodput, d.judgedGoodput
	for _, p := range c.table.Peers() {
		if c.key == nil && !c.counted[p.ID] {
			continue
		}
		pg, announced, over := peer(&p)
		g += pg
		gj += math.Min(pg, judgedOf(announced, over))
	}
	return g, gj
}

// peerGoodput is a peer's announced goodput, bounded by what its announced
// windows could carry (cwnd x MSS / min RTT per flow, x2 for the sampling)
// and by max_ap_rate (limit).
func peerGoodput(p *Peer, limit config.Rate) float64 {
	g := float64(p.Last.GoodputKbit) * 1000
	var w float64
	for _, f := range p.Last.Flows {
		rtt := max(f.MinRTT, 100*time.Microsecond)
		w += windowBits(uint32(f.Cwnd), min(uint32(f.MSS), 9000), rtt)
	}
	return math.Min(math.Min(g, 2*w), float64(limit.Bits()))
}

// ownAnnouncement builds this interval's announcement. Caller holds mu.
func (c *Controller) ownAnnouncement(now time.Time) Announcement {
	a := Announcement{HostID: c.hostID, Seq: c.seq, Time: now, Interval: c.cfg.Interval.D(),
		GoodputKbit: uint32(min(c.up.goodput/1000, math.MaxUint32)), GoodputOver: overOf(c.up.goodput, c.up.judgedGoodput)}
	for _, fs := range sortedFlows(c.flows) {
		if !fs.active {
			continue
		}
		f := fs.f
		a.ActiveFlows++
		q := f.NotSent + f.InFlight
		a.BytesWaiting += q
		if f.Lane >= lane.Realtime && f.Lane <= lane.Background {
			a.LaneMix[f.Lane-1]++
		} else {
			a.LaneMix[lane.Interactive-1]++
		}
		a.Flows = append(a.Flows, FlowSummary{Lane: f.Lane, CAState: f.CAState,
			Cwnd: uint16(min(f.Cwnd, math.MaxUint16)), MSS: uint16(min(f.MSS, math.MaxUint16)),
			SRTT: f.SRTT, MinRTT: f.MinRTT, Queued: uint32(min(q, math.MaxUint32))})
	}
	c.ownDown(&a)
	a.UpStopped, a.DownStopped = c.up.safety.stopped(now), c.down.safety.stopped(now)
	return a
}

// sortedFlows are the flows by socket cookie.
func sortedFlows(flows map[uint64]*flowState) []*flowState {
	out := make([]*flowState, 0, len(flows))
	for _, fs := range flows {
		out = append(out, fs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].f.Cookie < out[j].f.Cookie })
	return out
}

// peerLoad turns a peer's announcement into a HostLoad; queued data beyond
// the flow records is added as one more flow at the host's smallest RTT.
func peerLoad(p *Peer) HostLoad {
	h := HostLoad{ID: p.ID}
	var sum uint64
	minRTT := time.Duration(0)
	for _, f := range p.Last.Flows {
		h.Flows = append(h.Flows, FlowLoad{MSS: uint32(f.MSS), MinRTT: f.MinRTT, Queued: uint64(f.Queued)})
		sum += uint64(f.Queued)
		if f.MinRTT > 0 && (minRTT == 0 || f.MinRTT < minRTT) {
			minRTT = f.MinRTT
		}
	}
	if p.Last.BytesWaiting > sum && len(h.Flows) > 0 {
		h.Flows = append(h.Flows, FlowLoad{MSS: 1448, MinRTT: minRTT, Queued: p.Last.BytesWaiting - sum})
	}
	if len(h.Flows) == 0 { // active but no records: assume one bulk flow
		h.Flows = []FlowLoad{{MSS: 1448, Queued: math.MaxUint32}}
	}
	return h
}

// recomputeAndApply derives every cap and applies them: between ticks,
// on an event (a peer or a flow joined or left, a cap's dwell ended).
func (c *Controller) recomputeAndApply() {
	c.mu.Lock()
	p := c.recompute(c.newRound())
	c.mu.Unlock()
	c.apply(p)
}

// judgeAndApply is recomputeAndApply at a tick: the uplink's interval is
// judged first (the safety signals and the estimate count intervals, not
// events).
func (c *Controller) judgeAndApply() {
	c.mu.Lock()
	r := c.newRound()
	c.observe(r)
	p := c.recompute(r)
	c.mu.Unlock()
	c.apply(p)
}

// capPlan is what one recompute wants applied.
type capPlan struct {
	up, down map[uint64]uint32 // by socket cookie: segments, bytes
	lanes    map[lane.Lane]uint32
}

// recompute derives every local flow's caps, both ways, and the lanes'
// default caps. Caller holds mu.
func (c *Controller) recompute(r *round) capPlan {
	capping, reason := c.capDecision(r)
	selfShare := c.setCoopCaps(r, capping)
	sockets, fst := c.ruleCaps(r)
	lanes, laneNames := c.laneCaps(r, capping, selfShare)
	c.fillStatus(r, capping, reason, selfShare, fst, laneNames)
	down := c.recomputeDown(c.now(), c.table.Peers(), c.st.Flows)
	return capPlan{up: sockets, down: down, lanes: lanes}
}

// round is the group as one recompute sees it: the rate, this host's
// active flows, the hosts counted in N (this host first when it sends)
// and their shares and per-flow targets.
type round struct {
	now            time.Time
	peers          []Peer
	rate           uint64
	src            string
	p              CapParams
	self           HostLoad
	selfStates     []*flowState // this host's active flows, as in self
	hosts          []HostLoad
	selfIdx        int            // this host in hosts, -1 when it does not send
	peerIdx        map[uint64]int // counted peers in hosts
	realtimeActive bool           // a realtime-lane flow here or at a peer
	uncounted      int
	shares         []float64
	groupTargets   [][]float64
}

// newRound gathers the group: this host's active flows and the counted
// active peers, and computes the shares and per-flow targets.
func (c *Controller) newRound() *round {
	r := &round{now: c.now(), peers: c.table.Peers(), selfIdx: -1, peerIdx: map[uint64]int{}}
	r.rate, r.src = c.up.rate(r.now)
	r.p = CapParams{RateBits: r.rate, HeadroomBits: uint64(c.cfg.Headroom), MinSegments: c.cfg.MinSegments,
		DemandAware: c.cfg.DemandAware, QueueAllowance: c.cfg.QueueAllowance}
	r.self = HostLoad{ID: c.hostID}
	for _, fs := range sortedFlows(c.flows) {
		if fs.active {
			f := fs.f
			r.self.Flows = append(r.self.Flows, FlowLoad{Cookie: f.Cookie, MSS: f.MSS, MinRTT: f.MinRTT, Queued: f.NotSent + f.InFlight})
			r.selfStates = append(r.selfStates, fs)
			if f.Lane == lane.Realtime {
				r.realtimeActive = true
			}
		}
	}
	if len(r.self.Flows) > 0 {
		r.selfIdx = 0
		r.hosts = append(r.hosts, r.self)
	}
	r.uncounted = c.countPeers(r.peers, r.now)
	for i := range r.peers {
		pp := &r.peers[i]
		if pp.Last.LaneMix[0] > 0 {
			r.realtimeActive = true
		}
		if pp.Active() && (c.key != nil || c.counted[pp.ID]) {
			r.peerIdx[pp.ID] = len(r.hosts)
			r.hosts = append(r.hosts, peerLoad(pp))
		}
	}
	r.shares = r.p.HostShares(r.hosts)
	r.groupTargets = r.p.GroupTargets(r.hosts, r.shares)
	return r
}

// observe judges one interval of the uplink: its rate estimator and
// safety fallback, and a peer's fallback followed.
func (c *Controller) observe(r *round) {
	obs, groupMinRTT := c.observation(r)
	peer, stopped := c.stoppedPeer(r.peers, false)
	c.up.judge(r.now, groupSample{goodput: c.up.groupGood, judged: c.up.groupJudge, inflation: obs.inflation,
		minRTT: groupMinRTT, windows: groupWindows(r)}, obs, peer, stopped)
}

// observation is the safety fallback's view of the group's flows: their
// median RTT inflation and queueing delay, whether the windows caps hold
// fit the rate, this host's promised share and whether its flows sit at
// their caps; and the group's median min RTT.
func (c *Controller) observation(r *round) (observation, time.Duration) {
	obs := observation{goodput: c.up.goodput}
	var infl, qd, minRTTs []float64
	var windowRate float64
	addFlow := func(srtt, minRTT time.Duration, cwnd, mss uint32, ours bool) {
		if srtt <= 0 || minRTT <= 0 {
			return
		}
		obs.flows++
		infl = append(infl, float64(srtt)/float64(minRTT))
		qd = append(qd, float64(srtt-minRTT))
		minRTTs = append(minRTTs, float64(minRTT))
		if ours {
			windowRate += windowBits(cwnd, mss, minRTT)
		}
	}
	for _, fs := range r.selfStates {
		addFlow(fs.f.SRTT, fs.f.MinRTT, fs.f.Cwnd, fs.f.MSS, true)
	}
	for _, pp := range r.peers {
		pi, counted := r.peerIdx[pp.ID]
		for j, f := range pp.Last.Flows {
			held := true
			if counted && r.rate > 0 && j < len(r.groupTargets[pi]) {
				held = !uncapped(float64(f.Cwnd), r.groupTargets[pi][j], c.cfg.MinSegments)
			}
			addFlow(f.SRTT, f.MinRTT, uint32(f.Cwnd), uint32(f.MSS), held)
		}
	}
	obs.inflation = median(infl)
	obs.queueDelay = time.Duration(median(qd))
	obs.inflightLow = r.rate > 0 && windowRate <= float64(r.rate)*(1+c.cfg.QueueAllowance)
	if r.selfIdx >= 0 && c.cfg.APRate > 0 {
		obs.promised = r.shares[r.selfIdx] * float64(c.cfg.APRate.Bits())
		obs.rate = float64(c.cfg.APRate.Bits())
	}
	obs.group = c.up.goodput
	for i := range r.peers {
		if _, counted := r.peerIdx[r.peers[i].ID]; counted {
			obs.group += float64(r.peers[i].Last.GoodputKbit) * 1000
		}
	}
	for _, fs := range r.selfStates {
		if fs.coop > 0 && fs.f.Cwnd+1 >= fs.coop {
			obs.atCap = true
		}
	}
	return obs, time.Duration(median(minRTTs))
}

// groupWindows is what the group's windows carry in an interval at their
// current RTT: the sum of cwnd x MSS / srtt over this host's active flows
// and the counted peers' announced ones (the goodput's hosts), bit/s (0:
// none known). An interval can deliver more only by a loss's catch-up
// (estimate.go: recorded).
func groupWindows(r *round) float64 {
	w := 0.0
	add := func(cwnd, mss uint32, srtt time.Duration) {
		if srtt > 0 {
			w += windowBits(cwnd, mss, srtt)
		}
	}
	for _, fs := range r.selfStates {
		add(fs.f.Cwnd, fs.f.MSS, fs.f.SRTT)
	}
	for _, pp := range r.peers {
		if _, counted := r.peerIdx[pp.ID]; counted {
			for _, f := range pp.Last.Flows {
				add(uint32(f.Cwnd), uint32(f.MSS), f.SRTT)
			}
		}
	}
	return w
}

// windowBits is what a window of cwnd segments of mss bytes carries in
// one rtt, bit/s.
func windowBits(cwnd, mss uint32, rtt time.Duration) float64 {
	return float64(cwnd) * float64(mss) * 8 / rtt.Seconds()
}

// capDecision says whether cooperative caps apply, and if not, why.
func (c *Controller) capDecision(r *round) (bool, string) {
	capping, reason := c.up.capOK, c.up.capWhy
	if capping && r.rate == 0 { // the fallback's reason stands (its hold restarts the estimate)
		capping, reason = false, "AP rate unknown (not configured, no goodput measured yet)"
	}
	if !c.cfg.Cooperative {
		capping, reason = false, "cooperative caps off by policy (rule caps only)"
	}
	if capping && len(r.hosts) == 0 {
		reason = "no active senders"
	}
	return capping, reason
}

// setCoopCaps sets the cooperative caps of this host's active flows,
// through the hysteresis filter that follows at once when the group
// changed, or clears every flow's when not capping; it returns this host's
// share.
func (c *Controller) setCoopCaps(r *round, capping bool) float64 {
	changed := c.up.groupChanged(r.hosts, capping, r.now, c.expired)
	selfShare := 0.0
	if r.selfIdx >= 0 {
		selfShare = r.shares[r.selfIdx]
		targets := r.groupTargets[r.selfIdx]
		dwell := capDwell(c.cfg.Interval.D())
		for i, fs := range r.selfStates {
			if capping {
				fs.coop = fs.filt.next(targets[i], r.now, changed, dwell)
			}
		}
	}
	if !capping {
		for _, fs := range c.flows {
			fs.coop = 0
			fs.filt.set(0)
		}
	}
	return selfShare
}

// ruleApplies says whether rule x is in force this round.
func (r *round) ruleApplies(x Rule) bool { return x.When != WhenRealtimeActive || r.realtimeActive }

// ruleCaps sets every flow's cap, the minimum of its cooperative cap and
// the rule caps that match it, and returns the caps by socket cookie and
// the flows' status.
func (c *Controller) ruleCaps(r *round) (map[uint64]uint32, []FlowStatus) {
	sockets := map[uint64]uint32{}
	var fst []FlowStatus
	for _, fs := range sortedFlows(c.flows) {
		f := fs.f
		v, rule := fs.coop, ""
		for _, x := range c.cfg.Rules {
			if !r.ruleApplies(x) || !x.matches(f) {
				continue
			}
			if v == 0 || x.Segments < v {
				v, rule = x.Segments, x.Name
			}
		}
		fs.rule = rule
		if fs.setCap(v, r.now) {
			c.cnt.CapChanges++
		}
		sockets[f.Cookie] = fs.cap
		fst = append(fst, FlowStatus{Cookie: f.Cookie, Lane: f.Lane.String(), App: f.App, Active: fs.active,
			MinRTT: float64(f.MinRTT.Microseconds()) / 1000, MSS: f.MSS, Cwnd: f.Cwnd,
			Waiting: f.NotSent + f.InFlight, Coop: fs.coop, Rule: fs.rule, Cap: fs.cap,
			CapChanges: fs.changes, CapHistory: append([]CapChange(nil), fs.history...)})
	}
	return sockets, fst
}

// laneCaps are the lanes' default caps for connections established before
// the next sample: one more flow's part of this host's share (or of a new
// bulk host's, when it does not send), and the lanes' rule caps.
func (c *Controller) laneCaps(r *round, capping bool, selfShare float64) (map[lane.Lane]uint32, map[string]uint32) {
	lanes := map[lane.Lane]uint32{}
	laneNames := map[string]uint32{}
	var newCap uint32
	if capping && r.rate > 0 {
		rtt, mss := referencePath(r.self, r.hosts)
		if rtt > 0 {
			nf := float64(len(r.self.Flows) + 1)
			share := selfShare
			if r.selfIdx < 0 { // we would join as one more bulk host
				share = 1 / float64(len(r.hosts)+1)
			}
			newCap = max(segments(r.p.window(rtt)*share/nf, mss), r.p.MinSegments)
		}
	}
	for _, l := range lane.All {
		v := newCap
		for _, x := range c.cfg.Rules {
			if x.App == "" && r.ruleApplies(x) && x.laneMatches(l) && (v == 0 || x.Segments < v) {
				v = x.Segments
			}
		}
		lanes[l] = v
		laneNames[l.String()] = v
	}
	return lanes, laneNames
}

// fillStatus writes the round into the uplink's status.
func (c *Controller) fillStatus(r *round, capping bool, reason string, selfShare float64, fst []FlowStatus, laneNames map[string]uint32) {
	st := &c.st
	st.N = len(r.hosts)
	st.Uncounted = r.uncounted
	st.SelfActive = r.selfIdx >= 0
	st.RateBits, st.RateSource = r.rate, r.src
	st.Estimate = nil
	if c.up.estimated() {
		st.Estimate = c.up.est.status()
	}
	st.Capping, st.Reason = capping && len(r.hosts) > 0, reason
	if st.Capping {
		st.Reason = ""
	}
	st.SelfShare = selfShare
	st.GoodputBits = uint64(c.up.goodput)
	st.Flows = fst
	st.LaneCaps = laneNames
	st.Peers = st.Peers[:0]
	for _, pp := range r.peers {
		ps := PeerStatus{ID: fmt.Sprintf("%016x", pp.ID), Addr: pp.Addr.String(), Active: pp.Active(),
			Flows: int(pp.Last.ActiveFlows), Waiting: pp.Last.BytesWaiting, GoodputBits: uint64(pp.Last.GoodputKbit) * 1000,
			LaneMix: pp.Last.LaneMix, FirstSeen: pp.FirstSeen, LastSeen: pp.LastSeen, Counted: c.key != nil || c.counted[pp.ID],
			DownFlows: int(pp.Last.DownFlows), DownGoodputBits: uint64(pp.Last.DownGoodputKbit) * 1000,
			UpStopped: pp.Last.UpStopped, DownStopped: pp.Last.DownStopped}
		if i, ok := r.peerIdx[pp.ID]; ok {
			ps.Share = r.shares[i]
		}
		st.Peers = append(st.Peers, ps)
	}
	st.Updated = r.now
}

// countPeers keeps, without a key, the set of active peers counted in N:
// a peer that stops or leaves drops out at once; others are admitted one
// per keyless_growth (longest known first) up to keyless_max_peers. It
// returns how many active peers wait outside N. Caller holds mu.
func (c *Controller) countPeers(peers []Peer, now time.Time) int {
	if c.key != nil {
		return 0
	}
	active := map[uint64]bool{}
	var waiting []*Peer
	for i := range peers {
		p := &peers[i]
		if !p.Active() {
			continue
		}
		active[p.ID] = true
		if !c.counted[p.ID] {
			waiting = append(waiting, p)
		}
	}
	for id := range c.counted {
		if !active[id] {
			delete(c.counted, id)
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].FirstSeen.Before(waiting[j].FirstSeen) })
	for len(waiting) > 0 && len(c.counted) < c.cfg.KeylessMaxPeers &&
		(c.lastCount.IsZero() || now.Sub(c.lastCount) >= c.cfg.KeylessGrowth.D()) {
		c.counted[waiting[0].ID] = true
		c.lastCount = now
		waiting = waiting[1:]
	}
	return len(waiting)
}

// expire removes silent peers and remembers when. Caller holds mu.
func (c *Controller) expire(now time.Time) []uint64 {
	gone := c.table.Expire(now)
	if c.expired == nil {
		c.expired = map[uint64]time.Time{}
	}
	for id, t := range c.expired {
		if now.Sub(t) > time.Minute {
			delete(c.expired, id)
		}
	}
	for _, id := range gone {
		c.expired[id] = now
	}
	return gone
}

// groupKey names the group's make-up: which hosts are active with how many
// flows each (ordered as hosts is) and whether capping is on.
func groupKey(hosts []HostLoad, capping bool) string {
	b := make([]byte, 0, 12*len(hosts)+1)
	for _, h := range hosts {
		b = binary.BigEndian.AppendUint64(b, h.ID)
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Flows)))
	}
	if capping {
		b = append(b, 1)
	}
	return string(b)
}

// raising reports whether some flow's cap, either way, waits to grow.
// Caller holds mu.
func (c *Controller) raising() bool {
	for _, fs := range c.flows {
		if fs.filt.raising() || fs.dn.filt.raising() {
			return true
		}
	}
	return false
}

// referencePath is the min RTT and MSS a new connection is assumed to have:
// this host's smallest min RTT, else the group's.
func referencePath(self HostLoad, hosts []HostLoad) (time.Duration, uint32) {
	pick := func(fl []FlowLoad) (time.Duration, uint32) {
		var rtt time.Duration
		var mss uint32 = 1448
		for _, f := range fl {
			if f.MinRTT > 0 && (rtt == 0 || f.MinRTT < rtt) {
				rtt = f.MinRTT
				if f.MSS > 0 {
					mss = f.MSS
				}
			}
		}
		return rtt, mss
	}
	if rtt, mss := pick(self.Flows); rtt > 0 {
		return rtt, mss
	}
	var all []FlowLoad
	for _, h := range hosts {
		all = append(all, h.Flows...)
	}
	return pick(all)
}

// apply pushes changed caps to the datapath (outside mu: it may block).
func (c *Controller) apply(p capPlan) {
	c.applyDirection(&c.up, p.up)
	c.applyLanes(p.lanes)
	c.applyDirection(&c.down, p.down)
}

// applyDirection pushes one direction's changed caps, its setter's switch
// turned on first.
func (c *Controller) applyDirection(d *direction, caps map[uint64]uint32) {
	if d.set == nil {
		return
	}
	c.mu.Lock()
	todo := d.pending(caps)
	switchOn, refused := d.wantsSwitch(), d.refused != ""
	c.mu.Unlock()
	if refused || (switchOn && !c.switchOn(d)) {
		return
	}
	done, errs := d.push(todo)
	c.mu.Lock()
	defer c.mu.Unlock()
	d.record(done, func(ck uint64) bool { _, live := c.flows[ck]; return live })
	if len(errs) > 0 {
		c.cnt.ApplyErrors += uint64(len(errs))
		c.st.LastError = d.applyError(errs)
	}
}

// switchOn turns a direction's setter's switch on; it reports whether it
// is.
func (c *Controller) switchOn(d *direction) bool {
	err := d.set.switchCaps(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	d.switched(err)
	if err != nil {
		c.cnt.ApplyErrors++
		c.st.LastError = d.applyError([]error{err})
		return false
	}
	return true
}

// applyLanes pushes the lanes' changed default caps.
func (c *Controller) applyLanes(lanes map[lane.Lane]uint32) {
	if c.lanes.set == nil {
		return
	}
	c.mu.Lock()
	todo := c.lanes.pending(lanes)
	c.mu.Unlock()
	done, errs := c.lanes.push(todo)
	c.mu.Lock()
	defer c.mu.Unlock()
	for l, v := range done {
		c.lanes.applied[l] = v
	}
	if len(errs) > 0 {
		c.cnt.ApplyErrors += uint64(len(errs))
		c.st.LastError = fmt.Sprintf("apply lane caps: %v", errors.Join(errs...))
	}
}

// Status returns a snapshot of the controller's state.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Counters = c.cnt
	s.Peers = append([]PeerStatus(nil), c.st.Peers...)
	s.Flows = append([]FlowStatus(nil), c.st.Flows...)
	s.LaneCaps = make(map[string]uint32, len(c.st.LaneCaps))
	for k, v := range c.st.LaneCaps {
		s.LaneCaps[k] = v
	}
	return s
}

func (r Rule) laneMatches(l lane.Lane) bool {
	if r.Lane == "" {
		return true
	}
	rl, err := lane.Parse(r.Lane)
	return err == nil && rl == l
}

func (r Rule) matches(f Flow) bool {
	fl := f.Lane
	if fl == lane.Unset {
		fl = lane.Interactive
	}
	return r.laneMatches(fl) && (r.App == "" || r.App == f.App)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// DeriveHostID derives a stable host id from the machine id, the hostname
// and the interface's name, hardware address and IP addresses (distinct per
// namespace interface in the lab), or a random one if none is readable.
// Call it in the interface's network namespace.
func DeriveHostID(ifname string) uint64 {
	h := sha256.New()
	n := 0
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		h.Write(b)
		n++
	}
	if hn, err := os.Hostname(); err == nil {
		h.Write([]byte(hn))
	}
	h.Write([]byte(ifname))
	if ifi, err := net.InterfaceByName(ifname); err == nil {
		if len(ifi.HardwareAddr) > 0 {
			h.Write(ifi.HardwareAddr)
			n++
		}
		if addrs, err := ifi.Addrs(); err == nil { // TUN devices have no MAC
			for _, a := range addrs {
				h.Write([]byte(a.String()))
				n++
			}
		}
	}
	if n == 0 {
		var r [8]byte
		_, _ = rand.Read(r[:])
		h.Write(r[:])
	}
	id := binary.BigEndian.Uint64(h.Sum(nil))
	if id == 0 {
		id = 1
	}
	return id
}
