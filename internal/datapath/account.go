// account.go: the account of each interface and direction as sock_ops
// keeps it (cwndcap.h's lanes_link_rate, cause.h's lanes_fg_cause), read
// for status: the capacity estimate, whose the queue is by the last cause
// test, and whether background is held there now.
package datapath

import (
	"errors"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/yield"
)

// Queue owners, as cause.h's verdicts (CAUSE_*) name them.
const (
	OwnerUntested      = "untested"
	OwnerTesting       = "testing"
	OwnerBackground    = "background"
	OwnerNotBackground = "not background"
)

// cause.h's verdicts (CAUSE_*).
const (
	causeTesting = 1
	causeOurs    = 2
	causeNotOurs = 3
)

// causeVerdictHold is cause.h's FG_CAUSE_VERDICT_NS: a verdict stands this
// long, so it was reached this long before its end.
const causeVerdictHold = 2 * time.Second

// linkRateHalf is cwndcap.h's LINK_RATE_HALF_NS.
const linkRateHalf = 10 * time.Second

// LinkAccount is one interface and direction's account.
type LinkAccount struct {
	CapacityBps uint64        // the capacity estimate, bit/s; 0: not measured (downloads)
	Owner       string        // Owner*: the queue's owner by the last cause test
	TestedAgo   time.Duration // since that test's verdict (or start, testing); 0: untested
	Tests       uint64        // cause tests started
	NotOurs     uint64        // of them, found not the background's
	Held        bool          // background held in this direction now
	// Floor: a download at rLEDBAT's minimum window by its queue beside a
	// foreground (lanes_rl_floor; present, or a foreground TCP socket's
	// sample on a link too slow for presence): its ACKs paced (down only)
	Floor bool
	Why   string // Why*: why the background is where it is
}

// Why the background is where it is, in one direction.
const (
	WhyFree    = "free"                     // no foreground: its own target
	WhySharing = "sharing"                  // a foreground present, not harmed
	WhyHarm    = "held by harm"             // this direction's foreground harmed
	WhyOpening = "held by an opening"       // a foreground connection just opened
	WhyNotOurs = "not ours"                 // the queue's test found it not background's: released
	WhyFloor   = "at its floor, ACKs paced" // a download's window at its minimum by its queue, beside a foreground
	WhyUntold  = "held by untold"           // beside a foreground without TCP RTT samples (lab switch)
)

// Accounts are the accounts by ifindex (key 0: an interface not known),
// each [yield.Up, yield.Down]; nil without lanes' own sock_ops.
func (y *FgYield) Accounts() (map[int][2]LinkAccount, error) {
	if y.ops == nil {
		return nil, nil
	}
	out := map[int][2]LinkAccount{}
	err := y.guard.use(func() error {
		now := monotonicNS()
		var idx uint32
		var lr sockops.SockopsLinkRate
		il := y.ops.LanesLinkRate.Iterate()
		for il.Next(&idx, &lr) {
			a := out[int(idx)]
			a[yield.Up].CapacityBps = 8 * linkRateAt(lr, now)
			out[int(idx)] = a
		}
		var c sockops.SockopsFgCause
		ic := y.ops.LanesFgCause.Iterate()
		for ic.Next(&idx, &c) {
			a := out[int(idx)]
			for d := range a {
				a[d].Owner, a[d].TestedAgo = causeOwner(c, d, now)
				a[d].Tests, a[d].NotOurs = c.Tests[d], c.NotOurs[d]
			}
			out[int(idx)] = a
		}
		for i, a := range out {
			st, anyOpening := y.fgState(uint32(i), now)
			var floor uint64
			a[yield.Down].Floor = y.on && y.cls.LanesRlFloor.Lookup(uint32(i), &floor) == nil && floor != 0 &&
				(st.Window.Held(now, yield.KernelRule) || st.Harm.TCPSeen(now)) // classifier.c's fg_beside
			for d := range a {
				a[d].Held = y.on && st.HoldsDir(now, anyOpening, d)
				if a[d].Owner == "" {
					a[d].Owner = OwnerUntested
				}
				a[d].Why = whyOf(st, anyOpening, a[d], now, d)
			}
			out[i] = a
		}
		return errors.Join(il.Err(), ic.Err())
	})
	return out, err
}

// whyOf is why background in direction d is where it is at now, by st
// (the interface's yield state) and a (that direction's account so far).
func whyOf(st yield.State, anyOpening bool, a LinkAccount, now uint64, d int) string {
	switch {
	case st.Harm.HarmedDir(now, d):
		return WhyHarm
	case st.Opening(now) || anyOpening:
		return WhyOpening
	case a.Held:
		return WhyUntold
	case a.Owner == OwnerNotBackground && a.TestedAgo < causeVerdictHold:
		return WhyNotOurs
	case a.Floor:
		return WhyFloor
	case st.Untold(now) || st.Window.Held(now, yield.KernelRule):
		return WhySharing
	}
	return WhyFree
}

// linkRateAt is cwndcap.h's link_rate_of: lr's estimate at now, bytes/s.
func linkRateAt(lr sockops.SockopsLinkRate, now uint64) uint64 {
	if now < lr.At {
		return lr.Bps
	}
	halves := (now - lr.At) / uint64(linkRateHalf)
	if halves >= 64 {
		return 0
	}
	return lr.Bps >> halves
}

// causeOwner is direction d's owner by c's last test at now, and how long
// ago that test ended (or began, one running).
func causeOwner(c sockops.SockopsFgCause, d int, now uint64) (string, time.Duration) {
	ago := func(t uint64) time.Duration {
		if t == 0 || now < t {
			return 0
		}
		return time.Duration(now - t)
	}
	switch c.Verdict[d] {
	case causeTesting:
		return OwnerTesting, ago(c.TestAt[d])
	case causeOurs:
		return OwnerBackground, ago(c.Until[d] - uint64(causeVerdictHold))
	case causeNotOurs:
		return OwnerNotBackground, ago(c.Until[d] - uint64(causeVerdictHold))
	}
	return OwnerUntested, 0
}
