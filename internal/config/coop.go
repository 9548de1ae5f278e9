// coop.go: the `coop:` section of the policy file — cooperative cwnd caps
// among hosts sharing one access point, and per-application cap rules (run
// by internal/coop).
package config

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
)

// Coop is the `coop:` section of the policy file.
type Coop struct {
	// Enabled turns the cooperative controller on.
	Enabled bool `yaml:"enabled"`
	// Cooperative: cap connections by the shared-medium formula; false
	// keeps only the rule caps (announcements still flow, for rules that
	// depend on peers' realtime streams).
	Cooperative bool `yaml:"cooperative"`
	// Interface is the managed LAN interface announcements go out on; empty
	// means the daemon's managed interface.
	Interface string `yaml:"interface"`
	// Port is the UDP port of announcements (broadcast on the LAN).
	Port uint16 `yaml:"port"`
	// Transport: "both" (IPv4 broadcast and IPv6 link-local multicast to
	// ff02::6c61:6e65, default), "ipv4" or "ipv6".
	Transport string `yaml:"transport"`
	// UnicastPeers, if set, are the addresses announcements go to instead
	// of the broadcast address (networks that isolate stations' broadcast).
	UnicastPeers []string `yaml:"unicast_peers"`
	// Interval between two announcements of this host (the paper: 0.5 s).
	Interval Duration `yaml:"interval"`
	// SilenceIntervals: a peer silent for this many of its intervals is
	// removed from the peer table.
	SilenceIntervals int `yaml:"silence_intervals"`
	// Key is the group key in hex (at least 16 bytes); KeyFile names a file
	// holding it (hex, or at least 16 raw bytes). Without either, peers are
	// unauthenticated and the daemon says so loudly.
	Key     string `yaml:"key"`
	KeyFile string `yaml:"key_file"`
	// MaxClockSkew bounds |now - announcement timestamp| (replay window).
	MaxClockSkew Duration `yaml:"max_clock_skew"`
	// MaxPeers bounds the peer table; announcements of further hosts are
	// dropped (counted) until a peer leaves.
	MaxPeers int `yaml:"max_peers"`
	// NewPeerRate is how many new peers per second the table admits (a
	// burst of NewPeerBurst); more are dropped and counted.
	NewPeerRate  float64 `yaml:"new_peer_rate"`
	NewPeerBurst int     `yaml:"new_peer_burst"`
	// KeylessMaxPeers: without a group key, at most this many peers count
	// in N, admitted one per KeylessGrowth (N grows slowly, up to a bound).
	KeylessMaxPeers int      `yaml:"keyless_max_peers"`
	KeylessGrowth   Duration `yaml:"keyless_growth"`
	// MaxAPRate bounds the estimated AP rate and any peer's announced
	// goodput (a liar cannot inflate the estimate past it).
	MaxAPRate Rate `yaml:"max_ap_rate"`
	// StateFile keeps the peers' last sequence numbers across restarts
	// (replay protection); empty: the daemon's default,
	// <state directory>/coop/<instance>.<interface>.json (/var/lib/lanes or
	// $STATE_DIRECTORY), which survives restarts and reboots.
	StateFile string `yaml:"state_file"`
	// APRate is the usable rate of the shared access point; 0 = estimate it
	// from the summed goodput of all announcing hosts.
	APRate Rate `yaml:"ap_rate"`
	// DownlinkCaps: receivers cap the window their downloads advertise to
	// their share of the AP's downlink (downlink.go).
	DownlinkCaps bool `yaml:"downlink_caps"`
	// APDownlinkRate is the usable downlink rate of the access point; 0 =
	// estimate it from the group's downlink goodput.
	APDownlinkRate Rate `yaml:"ap_downlink_rate"`
	// Headroom is subtracted from rate x RTT before it is shared (the paper's
	// "about 120 kbit"). Text form "120kbit" or "15KB".
	Headroom Bits `yaml:"headroom"`
	// MinSegments is the smallest cap ever applied.
	MinSegments uint32 `yaml:"min_segments"`
	// DemandAware: hosts and flows with little queued data take what they
	// need; the rest share the remainder (else plain 1/N shares).
	DemandAware bool `yaml:"demand_aware"`
	// QueueAllowance: the group's windows may exceed the path's BDP (rate x
	// min RTT) by this fraction, a standing queue at the AP of at most that
	// share of the RTT: the path's RTT without a queue sits above its
	// minimum (jitter, the hosts' processing), and windows sized for the
	// minimum leave the medium idle. 0 = the paper's formula.
	QueueAllowance float64 `yaml:"queue_allowance"`
	// Safety: stop capping when traffic from hosts without lanes dominates.
	Safety CoopSafety `yaml:"safety"`
	// Rules are per-application / per-lane caps (docs/papers.md §002).
	Rules []CoopRule `yaml:"rules"`
}

// maxCoopDrainIntervals bounds safety.drain_intervals (50 s at 0.5 s).
const maxCoopDrainIntervals = 100

// CoopSafety tunes the fallback to plain TCP (open problem 4 of §001).
type CoopSafety struct {
	Enabled bool `yaml:"enabled"`
	// RTTInflation: the group's flows' median srtt/min_rtt above this while
	// our own summed window is below the shared BDP means someone else's
	// queue fills the medium.
	RTTInflation float64 `yaml:"rtt_inflation"`
	// GoodputFraction: this host's goodput below this fraction of its share
	// of the (configured) AP rate while its flows sit at their caps means
	// foreign traffic holds the medium.
	GoodputFraction float64 `yaml:"goodput_fraction"`
	// Trigger: intervals of the last 20 (triggerWindow) in which a
	// condition held before capping stops.
	Trigger int `yaml:"trigger_intervals"`
	// DrainIntervals (estimated rate only): capping stops at once when a
	// queue stands this many intervals in a row after the estimator's
	// drain lowered the caps to what the group delivers, while the
	// group's windows fit the estimate (safety.go). 0: off.
	DrainIntervals int `yaml:"drain_intervals"`
	// Hold is how long capping stays off before it is tried again (doubles
	// on each repeated trigger, up to 8x).
	Hold Duration `yaml:"hold"`
}

// CoopRule caps the flows it matches, by lane and/or application (the name of the
// policy rule or program that classified the flow).
type CoopRule struct {
	Name string `yaml:"name"`
	Lane string `yaml:"lane"`
	App  string `yaml:"app"`
	// When: "always" (default) or "realtime-active" (only while some host of
	// the group, this one or a peer, has an active realtime-lane uplink flow).
	When     string `yaml:"when"`
	Segments uint32 `yaml:"segments"`
}

// CoopRule conditions.
const (
	CoopWhenAlways         = "always"
	CoopWhenRealtimeActive = "realtime-active"
)

// Transports of announcements (`coop.transport`).
const (
	CoopTransportIPv4 = "ipv4"
	CoopTransportIPv6 = "ipv6"
	CoopTransportBoth = "both"
)

// DefaultCoopPort is the UDP port of announcements unless configured.
const DefaultCoopPort = 7431

// DefaultCoop returns the defaults: off, 0.5 s interval, 3 silent intervals,
// 120 kbit headroom, estimated AP rate, demand-aware shares, safety on.
func DefaultCoop() Coop {
	return Coop{
		Cooperative:      true,
		Port:             DefaultCoopPort,
		Transport:        CoopTransportBoth,
		Interval:         Duration(500 * time.Millisecond),
		SilenceIntervals: 3,
		MaxClockSkew:     Duration(30 * time.Second),
		MaxPeers:         64,
		NewPeerRate:      2,
		NewPeerBurst:     8,
		KeylessMaxPeers:  8,
		KeylessGrowth:    Duration(time.Second),
		MaxAPRate:        Rate(2e9),
		Headroom:         120_000,
		MinSegments:      4,
		DemandAware:      true,
		DownlinkCaps:     true,
		QueueAllowance:   0.05,
		Safety: CoopSafety{
			Enabled:         true,
			RTTInflation:    1.3,
			GoodputFraction: 0.7,
			Trigger:         10,
			DrainIntervals:  3,
			Hold:            Duration(30 * time.Second),
		},
	}
}

// Validate checks the section; errors name the field relative to `coop`.
func (c Coop) Validate() error {
	for _, check := range []func() error{
		c.validateTransport, c.validatePeers, c.validateRates, c.validateSafety, c.validateRules,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateTransport checks the port, transport and announcement timing.
func (c Coop) validateTransport() error {
	if c.Port == 0 {
		return Errorf("port", "must be 1..65535")
	}
	switch c.Transport {
	case CoopTransportIPv4, CoopTransportIPv6, CoopTransportBoth:
	default:
		return Errorf("transport", "unknown transport %q (want ipv4, ipv6 or both)", c.Transport)
	}
	if c.Interval.D() < 50*time.Millisecond || c.Interval.D() > time.Minute {
		return Errorf("interval", "%v out of range 50ms..1m", c.Interval)
	}
	if c.SilenceIntervals < 2 || c.SilenceIntervals > 100 {
		return Errorf("silence_intervals", "%d out of range 2..100", c.SilenceIntervals)
	}
	return nil
}

// validatePeers checks who may be a peer: unicast addresses, the key and
// the limits on how many peers, and how fast new ones, are taken.
func (c Coop) validatePeers() error {
	for i, a := range c.UnicastPeers {
		if _, err := netip.ParseAddr(a); err != nil {
			return Errorf(fmt.Sprintf("unicast_peers[%d]", i), "not an IP address: %q", a)
		}
	}
	if c.Key != "" && c.KeyFile != "" {
		return Errorf("key", "give key or key_file, not both")
	}
	if c.Key != "" {
		if _, err := parseKey([]byte(c.Key), false); err != nil {
			return Errorf("key", "%v", err)
		}
	}
	if c.MaxClockSkew.D() < time.Second {
		return Errorf("max_clock_skew", "%v too small (at least 1s)", c.MaxClockSkew)
	}
	if c.MaxPeers < 1 || c.MaxPeers > 4096 {
		return Errorf("max_peers", "%d out of range 1..4096", c.MaxPeers)
	}
	if !(c.NewPeerRate > 0 && c.NewPeerRate <= 1000) {
		return Errorf("new_peer_rate", "must be in (0, 1000] per second")
	}
	if c.NewPeerBurst < 1 || c.NewPeerBurst > c.MaxPeers {
		return Errorf("new_peer_burst", "%d out of range 1..max_peers", c.NewPeerBurst)
	}
	if c.KeylessMaxPeers < 1 || c.KeylessMaxPeers > c.MaxPeers {
		return Errorf("keyless_max_peers", "%d out of range 1..max_peers", c.KeylessMaxPeers)
	}
	if c.KeylessGrowth.D() < 0 || c.KeylessGrowth.D() > time.Minute {
		return Errorf("keyless_growth", "%v out of range 0..1m", c.KeylessGrowth)
	}
	return nil
}

// validateRates checks the AP rates, the queue allowance and the smallest cap.
func (c Coop) validateRates() error {
	if c.MaxAPRate < 64_000 {
		return Errorf("max_ap_rate", "%v too small", c.MaxAPRate)
	}
	if c.APRate != 0 && c.APRate < 64_000 {
		return Errorf("ap_rate", "%v too small (0 = estimate)", c.APRate)
	}
	if c.APDownlinkRate != 0 && c.APDownlinkRate < 64_000 {
		return Errorf("ap_downlink_rate", "%v too small (0 = estimate)", c.APDownlinkRate)
	}
	if !(c.QueueAllowance >= 0 && c.QueueAllowance <= 0.5) {
		return Errorf("queue_allowance", "%v out of range 0..0.5", c.QueueAllowance)
	}
	if c.MinSegments < 1 || c.MinSegments > 1000 {
		return Errorf("min_segments", "%d out of range 1..1000", c.MinSegments)
	}
	return nil
}

// validateSafety checks the fallback's settings when it is enabled.
func (c Coop) validateSafety() error {
	s := c.Safety
	if !s.Enabled {
		return nil
	}
	if s.RTTInflation <= 1 || math.IsNaN(s.RTTInflation) {
		return Errorf("safety.rtt_inflation", "must be > 1")
	}
	if !(s.GoodputFraction >= 0 && s.GoodputFraction < 1) {
		return Errorf("safety.goodput_fraction", "must be in [0, 1)")
	}
	if s.Trigger < 1 {
		return Errorf("safety.trigger_intervals", "must be at least 1")
	}
	if s.DrainIntervals < 0 || s.DrainIntervals > maxCoopDrainIntervals {
		return Errorf("safety.drain_intervals", "must be in 0..%d (0: off)", maxCoopDrainIntervals)
	}
	if s.Hold.D() < c.Interval.D() {
		return Errorf("safety.hold", "must be at least one interval")
	}
	return nil
}

// validateRules checks each rule and that their names are unique.
func (c Coop) validateRules() error {
	names := map[string]bool{}
	for i, r := range c.Rules {
		if err := r.validate(); err != nil {
			return Prefix(fmt.Sprintf("rules[%d]", i), err)
		}
		if names[r.Name] {
			return Errorf(fmt.Sprintf("rules[%d].name", i), "duplicate rule name %q", r.Name)
		}
		names[r.Name] = true
	}
	return nil
}

func (r CoopRule) validate() error {
	if r.Name == "" {
		return Errorf("name", "required")
	}
	if r.Lane == "" && r.App == "" {
		return Errorf("lane", "a rule needs a lane or an app to match")
	}
	if r.Lane != "" {
		if _, err := lane.Parse(r.Lane); err != nil {
			return Errorf("lane", "%v", err)
		}
	}
	switch r.When {
	case "", CoopWhenAlways, CoopWhenRealtimeActive:
	default:
		return Errorf("when", "unknown condition %q (want always or realtime-active)", r.When)
	}
	if r.Segments < 1 || r.Segments > 1<<20 {
		return Errorf("segments", "must be 1..%d", 1<<20)
	}
	return nil
}

// LoadKey returns the group key (nil when none is configured).
func (c Coop) LoadKey() ([]byte, error) {
	switch {
	case c.Key != "":
		return parseKey([]byte(c.Key), false)
	case c.KeyFile != "":
		if err := SecretMode(c.KeyFile); err != nil {
			return nil, fmt.Errorf("coop key file: %w", err)
		}
		b, err := os.ReadFile(c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("coop key file: %w", err)
		}
		k, err := parseKey(b, true)
		if err != nil {
			return nil, fmt.Errorf("coop key file %s: %w", c.KeyFile, err)
		}
		return k, nil
	}
	return nil, nil
}

// SecretMode refuses a file that holds a secret (the coop group key) and
// that its group or others may read: a local user who read the key forged
// keyed announcements (issue N19).
func SecretMode(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("%s holds the coop group key and is readable by group or others (mode %04o): chmod 600 %s", path, m, path)
	}
	return nil
}

// parseKey decodes a hex key; with raw, non-hex content is taken as bytes.
func parseKey(b []byte, raw bool) ([]byte, error) {
	s := strings.TrimSpace(string(b))
	k, err := hex.DecodeString(s)
	if err != nil {
		if !raw {
			return nil, fmt.Errorf("group key is not hex: %w", err)
		}
		k = b
	}
	if len(k) < 16 {
		return nil, fmt.Errorf("group key too short: %d bytes, want at least 16", len(k))
	}
	return k, nil
}

// Bits is an amount of data in bits (the headroom). Text form: "120kbit",
// "1mbit", a plain number of bits, or a byte size "15KB", "15000B".
type Bits uint64

func (b Bits) String() string { return Rate(b).String() }

// Bytes returns the amount in bytes (rounded down).
func (b Bits) Bytes() uint64 { return uint64(b) / 8 }

// ParseBits parses the text form of Bits.
func ParseBits(s string) (Bits, error) {
	if r, err := ParseRate(s); err == nil {
		return Bits(r), nil
	}
	if v, err := ParseBytes(s); err == nil {
		return Bits(v * 8), nil
	}
	return 0, fmt.Errorf("bad amount %q (want e.g. 120kbit or 15KB)", s)
}

func (b Bits) MarshalText() ([]byte, error) { return []byte(b.String()), nil }
func (b *Bits) UnmarshalText(t []byte) error {
	v, err := ParseBits(string(t))
	*b = v
	return err
}
