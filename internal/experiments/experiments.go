// Package experiments is the one value of the switches the lab and the
// tests turn: each leaves a settled rule off, to pair it with what it
// replaced, or forces the path an older kernel takes. An admin's daemon
// runs with the zero Set, the product's rules; the switches are set only
// by tests and by `lanes daemon`'s hidden flags (Flags), which the lab
// passes (docs/lab.md).
package experiments

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Set is every switch, off in the zero value.
type Set struct {
	// UntoldHeld holds background at the minimum beside a present
	// foreground no TCP RTT sample speaks for (a call: UDP), and leaves
	// foreground non-TCP arrivals out of its presence: the rule sharing by
	// the background's own queuing delay there replaced.
	UntoldHeld bool
	// DirectionsJoined holds background both ways for a foreground's harm
	// in either direction and reads every delay from the RTT: the rule
	// reading each direction's queue from TCP timestamps replaced.
	DirectionsJoined bool
	// QuietFixed: a foreground is quiet a fixed 150 ms after its last
	// stamp, not six gaps between its stamps: the rule the measured
	// quiet replaced.
	QuietFixed bool
	// RateUnkept: a background upload's window keeps no rate through the
	// other direction's queue its ACKs wait in; its growth scaled by the
	// longer round trip instead: the rule keeping the rate replaced.
	RateUnkept bool
	// RateByACKs: the account's upload capacity from its sockets' bytes
	// over their ACKs' arrival alone, not also over their sending: the
	// rule timing both replaced.
	RateByACKs bool
	// NoUndo: a background upload keeps the window a loss the kernel
	// found spurious took: the rule giving it back replaced.
	NoUndo bool
	// Share: parts of the share rule beside a present foreground left off.
	Share ShareOff
	// BgUDP: parts of the background QUIC/UDP class's rule left off.
	BgUDP BgUDPOff
	// StructOpsByUpdate registers the congestion controls by map update,
	// as on kernels before 6.4, even where struct_ops links exist.
	StructOpsByUpdate bool
	// NonRootPolicy accepts a policy file a non-root user could write.
	NonRootPolicy bool
}

// ShareOff names the parts of the share rule beside a present foreground
// (the background keeps the share target of queue there) left off.
type ShareOff struct {
	// Slope: LEDBAT++'s decrease above the share target as steep as above
	// its own target.
	Slope bool
	// Defer: the periodic slowdowns kept while sharing.
	Defer bool
	// Grow: LEDBAT++'s own growth below the share target, not in
	// proportion to the distance to it.
	Grow bool
	// Download: rLEDBAT holds downloads at the minimum beside a present
	// foreground instead of sharing as LEDBAT++ does.
	Download bool
}

// BgUDPOff names the parts of the background QUIC/UDP class's rule left off.
type BgUDPOff struct {
	// Slope: beside a present foreground, the decrease's slope in
	// multiples of the share target, not of the policy's target.
	Slope bool
	// Arrivals: the class's arrivals held at the yield's rate beside any
	// present foreground, not steered to the share target beside an
	// unharmed one.
	Arrivals bool
	// Shape: the class's egress policed (drops over the rate) where the
	// interface's tree has the shaper, not shaped.
	Shape bool
	// Ifb: the class's arrivals policed (drops over the rate) where the
	// interface has an IFB device, not shaped there.
	Ifb bool
	// BothWays: the class's queue its probes' whole RTT above their
	// minimum, the other direction's queue (foreground TCP timestamps)
	// not taken off.
	BothWays bool
	// KeepTokens: the policer's bucket left as it is at a decrease of the
	// class's rate, not emptied.
	KeepTokens bool
	// OwnLink: the class's link measured from its own bytes, not every
	// lane's (the interface's rx_bytes down, tx_bytes up), and no room
	// bound.
	OwnLink bool
	// Room: a shaped class bounded by its headroom of the whole measured
	// link, not by the room the other lanes leave of it, and its windows
	// busy at a quarter of the current target, not of the policy's.
	Room bool
	// Bursts: between a foreground's bursts the class grows a share of
	// the link a step, not back to its measured link at once.
	Bursts bool
}

// part is one name of a list flag and the switch it sets.
type part struct {
	name string
	on   *bool
}

// shareParts and bgUDPParts are the names the list flags take, in order.
func (s *Set) shareParts() []part {
	return []part{{"slope", &s.Share.Slope}, {"defer", &s.Share.Defer},
		{"grow", &s.Share.Grow}, {"download", &s.Share.Download}}
}

func (s *Set) bgUDPParts() []part {
	return []part{{"slope", &s.BgUDP.Slope}, {"arrivals", &s.BgUDP.Arrivals}, {"shape", &s.BgUDP.Shape}, {"ifb", &s.BgUDP.Ifb}, {"both-ways", &s.BgUDP.BothWays}, {"own-link", &s.BgUDP.OwnLink}, {"room", &s.BgUDP.Room}, {"bursts", &s.BgUDP.Bursts}}
}

// setParts switches on the parts named ("all": every one).
func setParts(flag string, parts []part, names []string) error {
	for _, n := range names {
		n = strings.TrimSpace(n)
		found := false
		for _, p := range parts {
			if n == "all" || n == p.name {
				*p.on, found = true, true
			}
		}
		if !found {
			var want []string
			for _, p := range parts {
				want = append(want, p.name)
			}
			return fmt.Errorf("--%s: unknown part %q (want %s or all)", flag, n, strings.Join(want, ", "))
		}
	}
	return nil
}

// Flags registers the switches on fs as hidden flags (not in --help nor
// the man page) and returns the function that reads them once fs is parsed.
func Flags(fs *pflag.FlagSet) func() (Set, error) {
	var s Set
	fs.BoolVar(&s.UntoldHeld, "untold-held", false, "hold background at the minimum beside a present foreground no TCP RTT sample speaks for (UDP), its arrivals not presence")
	fs.BoolVar(&s.DirectionsJoined, "directions-joined", false, "hold background both ways for a foreground's harm in either direction, every delay from the RTT")
	fs.BoolVar(&s.QuietFixed, "quiet-fixed", false, "a foreground quiet 150 ms after its last stamp, not six gaps between its stamps")
	fs.BoolVar(&s.RateUnkept, "rate-unkept", false, "a background upload's window keeps no rate through the other direction's queue, its growth scaled by the longer round trip")
	fs.BoolVar(&s.RateByACKs, "rate-by-acks", false, "the upload capacity estimate from the bytes acked over their ACKs' arrival alone, not also over their sending")
	fs.BoolVar(&s.NoUndo, "no-undo", false, "a background upload keeps the window a loss the kernel found spurious took")
	share := fs.StringSlice("share-rule-off", nil, "leave parts of the share rule beside a present foreground off (slope, defer, grow, download, all)")
	udp := fs.StringSlice("bg-udp-rule-off", nil, "leave parts of the background QUIC/UDP class's rule off (slope, arrivals, shape, ifb, both-ways, own-link, room, bursts, all)")
	fs.BoolVar(&s.BgUDP.KeepTokens, "bg-udp-keep-tokens", false, "leave the QUIC/UDP class's policer bucket as it is at a decrease of its rate")
	fs.BoolVar(&s.StructOpsByUpdate, "struct-ops-by-update", false, "register the BPF congestion controls by map update, as on kernels before 6.4")
	fs.BoolVar(&s.NonRootPolicy, "allow-non-root-policy", false, "accept a policy file not owned by root")
	for _, n := range Names {
		if err := fs.MarkHidden(n); err != nil {
			panic(err) // a name in Names without its flag above
		}
	}
	return func() (Set, error) {
		if err := setParts("share-rule-off", s.shareParts(), *share); err != nil {
			return s, err
		}
		return s, setParts("bg-udp-rule-off", s.bgUDPParts(), *udp)
	}
}

// Names are the flags Flags registers.
var Names = []string{"untold-held", "directions-joined", "quiet-fixed", "rate-unkept", "rate-by-acks", "no-undo", "share-rule-off", "bg-udp-rule-off", "bg-udp-keep-tokens",
	"struct-ops-by-update", "allow-non-root-policy"}

// On lists the switches set, as their flags would ("" when none): what the
// daemon logs at its start, so a run's log says it is not the product's.
func (s Set) On() string {
	var on []string
	add := func(flag string, set bool) {
		if set {
			on = append(on, "--"+flag)
		}
	}
	add("untold-held", s.UntoldHeld)
	add("directions-joined", s.DirectionsJoined)
	add("quiet-fixed", s.QuietFixed)
	add("rate-unkept", s.RateUnkept)
	add("rate-by-acks", s.RateByACKs)
	add("no-undo", s.NoUndo)
	on = appendParts(on, "share-rule-off", s.shareParts())
	on = appendParts(on, "bg-udp-rule-off", s.bgUDPParts())
	add("bg-udp-keep-tokens", s.BgUDP.KeepTokens)
	add("struct-ops-by-update", s.StructOpsByUpdate)
	add("allow-non-root-policy", s.NonRootPolicy)
	return strings.Join(on, " ")
}

func appendParts(on []string, flag string, parts []part) []string {
	var names []string
	for _, p := range parts {
		if *p.on {
			names = append(names, p.name)
		}
	}
	if len(names) == 0 {
		return on
	}
	return append(on, "--"+flag+" "+strings.Join(names, ","))
}
