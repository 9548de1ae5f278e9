// fgyield.go: the foreground-aware yield's state as the kernel keeps it
// (the classifier's foreground windows, sock_ops' harm and openings per
// interface), read for status, for the daemon's rLEDBAT and for the
// background class (bgclass.go). FgYield owns these reads; the rule
// itself is internal/yield's.
package datapath

import (
	"errors"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/yield"
)

// FgYield reads the yield's per-interface state from the host's maps.
type FgYield struct {
	guard      *guard
	cls        *classifier.ClassifierObjects
	on         bool             // HostConfig.Yield
	untoldHeld bool             // HostConfig.Experiments.UntoldHeld
	sockops    bool             // lanes' own sock_ops runs (it holds the downloads)
	ops        *sockops.Objects // nil without lanes' own sock_ops: no account
}

// ForegroundStates are the kernel's foreground states by ifindex (key 0:
// any interface): the classifier's windows (lanes_fg_active), the harm
// sock_ops read (lanes_fg_harm) and the last connection opening
// (lanes_fg_open), and the monotonic clock when they were read: the
// yield's state, for status.
func (y *FgYield) ForegroundStates() (map[int]yield.State, uint64, error) {
	out := map[int]yield.State{}
	err := y.guard.use(func() error {
		var idx uint32
		var w yield.Window
		var hm yield.Harm
		var t uint64
		it := y.cls.LanesFgActive.Iterate()
		for it.Next(&idx, &w) {
			st := out[int(idx)]
			st.Window = w
			out[int(idx)] = st
		}
		ih := y.cls.LanesFgHarm.Iterate()
		for ih.Next(&idx, &hm) {
			st := out[int(idx)]
			st.Harm = hm
			out[int(idx)] = st
		}
		io := y.cls.LanesFgOpen.Iterate()
		for io.Next(&idx, &t) {
			st := out[int(idx)]
			st.OpenEnd = t
			out[int(idx)] = st
		}
		return errors.Join(it.Err(), ih.Err(), io.Err())
	})
	return out, monotonicNS(), err
}

// BackgroundYielding says whether sock_ops' rule for downloads (rLEDBAT's
// hold in internal/bpf/sockops/yield.h: yielding() or sharing()) holds a background socket
// whose packets leave by ifindex (0: not known) at the minimum receive
// window now: the daemon's own rLEDBAT (internal/rledbat) follows the same
// yield as the BPF one.
func (y *FgYield) BackgroundYielding(ifindex int) bool {
	if !y.on {
		return false
	}
	var on bool
	_ = y.guard.use(func() error {
		idx, now := uint32(max(ifindex, 0)), monotonicNS()
		var w yield.Window
		present := y.cls.LanesFgActive.Lookup(idx, &w) == nil && w.Held(now, yield.KernelRule)
		on = y.sockops && (y.fgYieldDir(idx, now, yield.Down) || present)
		return nil
	})
	return on
}

// fgYield is lanes_maps.h's fg_yield: a foreground TCP socket of interface
// idx (0: not known) read harm within yield.HarmHold (or a background
// socket's own delay beside an untold foreground did), or a foreground
// connection's opening there (or somewhere not known) holds it
// (lanes_fg_open: the hold's end; the guard held, maps open); with
// HostConfig.Experiments.UntoldHeld also a foreground present (the classifier's stamp)
// without TCP RTT samples to tell its harm. A present foreground that is
// not harmed does not hold background: it keeps a share of its target
// beside it.
func (y *FgYield) fgYield(idx uint32, now uint64) bool {
	st, anyOpening := y.fgState(idx, now)
	return st.Holds(now, anyOpening)
}

// fgYieldDir is fgYield for background in direction dir (yield.Up,
// yield.Down) alone, as lanes_maps.h's fg_yield_dir.
func (y *FgYield) fgYieldDir(idx uint32, now uint64, dir int) bool {
	st, anyOpening := y.fgState(idx, now)
	return st.HoldsDir(now, anyOpening, dir)
}

// fgState reads interface idx's yield state, and whether an opening by an
// interface not known holds every one (the guard held, maps open).
func (y *FgYield) fgState(idx uint32, now uint64) (yield.State, bool) {
	st := yield.State{UntoldHeld: y.untoldHeld}
	_ = y.cls.LanesFgHarm.Lookup(idx, &st.Harm)
	_ = y.cls.LanesFgOpen.Lookup(idx, &st.OpenEnd)
	_ = y.cls.LanesFgActive.Lookup(idx, &st.Window)
	var unknown yield.State
	if idx != 0 {
		_ = y.cls.LanesFgOpen.Lookup(uint32(0), &unknown.OpenEnd)
	}
	return st, unknown.Opening(now)
}
