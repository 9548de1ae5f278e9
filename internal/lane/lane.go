// Package lane is the shared vocabulary of lanes: the three lanes, their
// numeric ids as used in BPF maps, and the tc class each one maps to.
//
// Every other package speaks of lanes through this one, so the numbers that
// cross into BPF programs and qdisc handles are defined in exactly one place.
package lane

import (
	"fmt"
	"slices"
	"strings"
)

// Lane is a traffic and task priority class. The zero value is Unset so that
// a missing map entry is never mistaken for a real lane.
type Lane uint8

const (
	Unset       Lane = 0
	Realtime    Lane = 1 // deadlines, EDF, always first
	Interactive Lane = 2 // default: what the user is doing
	Background  Lane = 3 // lower than best effort
)

// names is the one table of the lanes: each one's name and the other
// names Parse takes, from highest to lowest priority.
var names = []struct {
	lane    Lane
	name    string
	aliases []string
}{
	{Realtime, "realtime", []string{"rt"}},
	{Interactive, "interactive", []string{"default", "best-effort"}},
	{Background, "background", []string{"bg", "lbe"}},
}

// All lists the real lanes from highest to lowest priority.
var All = func() []Lane {
	var out []Lane
	for _, n := range names {
		out = append(out, n.lane)
	}
	return out
}()

// Names are the lanes' names, from highest to lowest priority.
func Names() []string {
	var out []string
	for _, n := range names {
		out = append(out, n.name)
	}
	return out
}

func (l Lane) String() string {
	for _, n := range names {
		if n.lane == l {
			return n.name
		}
	}
	return "unset"
}

// Parse turns a lane name (or an alias) into a Lane.
func Parse(s string) (Lane, error) {
	for _, n := range names {
		if s == n.name || slices.Contains(n.aliases, s) {
			return n.lane, nil
		}
	}
	return Unset, fmt.Errorf("unknown lane %q (want %s)", s, strings.Join(Names(), ", "))
}

// MarshalText and UnmarshalText let lanes appear by name in JSON and YAML.
func (l Lane) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// "unset" (what String prints for Unset) reads back as Unset.
func (l *Lane) UnmarshalText(b []byte) error {
	if string(b) == "unset" {
		*l = Unset
		return nil
	}
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Qdisc handles: the root HTB is 1:, each lane has class 1:<minor>.
const (
	RootMajor  = 0x1
	ClassMinor = 0x10 // lane l uses minor ClassMinor + l
)

// AckClassMinor is the minor of the ACK class (1:14): the pure ACKs of the
// host's capped downloads, at the rate the cooperative controller sets
// (docs/datapath.md "The ACK class").
const AckClassMinor = 0x14

// AckClassID is the tc classid of the ACK class.
const AckClassID = RootMajor<<16 | AckClassMinor

// BgShapeClassMinor is the minor of the background lane's non-TCP shaper
// (1:15): that class's egress where its controller shapes it at a rate
// instead of policing it (docs/background.md "Background QUIC and UDP").
const BgShapeClassMinor = 0x15

// BgShapeClassID is the tc classid of the background non-TCP shaper.
const BgShapeClassID = RootMajor<<16 | BgShapeClassMinor

// HeldAckClassMinor is the minor of the held-ACK class (1:16): the pure
// ACKs of background downloads while the yield holds them, paced at the
// rate the daemon sets (docs/background.md "Floors on a slow link").
const HeldAckClassMinor = 0x16

// HeldAckClassID is the tc classid of the held-ACK class.
const HeldAckClassID = RootMajor<<16 | HeldAckClassMinor

// ClassID returns the tc classid (major<<16 | minor) of the lane's class,
// the value the classifier writes into skb->tc_classid.
func (l Lane) ClassID() uint32 {
	if l == Unset {
		l = Interactive
	}
	return RootMajor<<16 | uint32(ClassMinor+uint32(l))
}

// HTBPrio is the HTB priority of the lane's class (0 is served first).
func (l Lane) HTBPrio() uint32 {
	switch l {
	case Realtime:
		return 0
	case Background:
		return 7
	}
	return 1
}

// DSCP code points that select a lane when a socket marks its own packets.
const (
	DSCPLowerEffort = 1  // RFC 8622 LE -> background
	DSCPExpedited   = 46 // EF -> realtime (if the policy grants it)
)
