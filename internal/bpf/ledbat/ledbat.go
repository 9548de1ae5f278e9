// ledbat.go loads the LEDBAT++ congestion control under a given name with
// its queuing-delay target and registers it (internal/bpf/structops: a
// struct_ops bpf_link on 6.4+, a map update before; it calls no kfunc, so
// it runs from 5.6); Close unregisters it. Names follow structops' rules
// (global, at most 15 bytes).
package ledbat

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/structops"
	model "github.com/lanes-net/lanes/internal/ledbat"
)

// The share rule's parts beside a present foreground (ledbat_core.h's
// LEDBAT_F_SHARE_*, the model's FlagShare*).
const (
	ShareSlope = model.FlagShareSlope // the decrease as steep as above the flow's own target
	ShareDefer = model.FlagShareDefer // periodic slowdowns wait until sharing ends
	ShareGrow  = model.FlagShareGrow  // the growth below the target in proportion to the distance to it
	ShareRule  = ShareSlope | ShareDefer | ShareGrow
	// RTTDelay (with the share rule's bits): the RTT sample is the delay,
	// not the upload direction's queue from TCP timestamps (ledbat.c's
	// LB_RTT_DELAY; a lab switch, the rule that one replaced)
	RTTDelay = 64
	// RateUnkept: the window keeps no rate through the other direction's
	// queue (ledbat_core.h's LEDBAT_F_RATE_UNKEPT; a lab switch, the rule
	// ledbat_keep_rate replaced)
	RateUnkept = model.FlagRateUnkept
	// NoUndo: a loss the kernel found spurious keeps the window it took
	// (ledbat.c's LB_NO_UNDO; a lab switch, the rule lb_undo replaced)
	NoUndo = 256
)

// CC is a loaded and registered LEDBAT++ congestion control.
type CC struct {
	Name   string
	Target time.Duration
	Mode   structops.Mode // how it is registered
	objs   LedbatObjects
	reg    *structops.Registration
}

// Load loads LEDBAT++ named name with the given queuing-delay target and
// registers it the way mode says (as capcc.Load). account holds the maps
// it reads by name, shared with the rest of the datapath (nil: none, the
// foreground-aware yield off): the classifier's lanes_fg_active
// (lanes_fg.h: beside a foreground present on a socket's interface the
// socket keeps FG_SHARE_TARGET of queue) and the account's lanes_link_rate
// (lanes_linkrate.h: the window a quiet link carries).
//
// share is the share rule beside a present foreground (ShareSlope,
// ShareDefer, ShareGrow: ledbat_core.h's LEDBAT_F_SHARE_*; ShareRule is the rule,
// 0 keeps LEDBAT++'s own decrease and slowdowns there).
func Load(name string, target time.Duration, share uint32, mode structops.Mode, account map[string]*ebpf.Map) (*CC, error) {
	if err := structops.CheckName(name); err != nil {
		return nil, err
	}
	if target < time.Millisecond || target > 10*time.Second {
		return nil, fmt.Errorf("ledbat: target %v out of range 1ms..10s", target)
	}
	spec, err := LoadLedbat()
	if err != nil {
		return nil, fmt.Errorf("ledbat: read object: %w", err)
	}
	ms := spec.Maps[LedbatMapLanesLedbat]
	if err := structops.SetName(ms, name); err != nil {
		return nil, err
	}
	mode = mode.Resolve()
	if err := structops.Prepare(ms, name, mode); err != nil {
		return nil, err
	}
	cfg := struct{ TargetUS, Share uint32 }{uint32(target / time.Microsecond), share & (ShareRule | RTTDelay | RateUnkept | NoUndo)}
	if err := spec.Variables[LedbatVarCFG].Set(cfg); err != nil {
		return nil, fmt.Errorf("ledbat: set target: %w", err)
	}
	c := &CC{Name: name, Target: target, Mode: mode}
	before := structops.IDs(name)
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	for name, m := range account {
		if _, ok := spec.Maps[name]; ok && m != nil {
			opts.MapReplacements[name] = m
		}
	}
	if err := spec.LoadAndAssign(&c.objs, opts); err != nil {
		return nil, structops.LoadError("ledbat", name, mode, before, err)
	}
	if c.reg, err = structops.Register(c.objs.LanesLedbat, name, mode); err != nil {
		c.objs.Close()
		return nil, structops.LoadError("ledbat", name, mode, before, err)
	}
	return c, nil
}

// Close unregisters the congestion control; sockets using it keep it until
// they close.
func (c *CC) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	if err := c.reg.Close(); err != nil {
		errs = append(errs, fmt.Errorf("ledbat: unregister %s: %w", c.Name, err))
	}
	if err := c.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("ledbat: close %s: %w", c.Name, err))
	}
	return errors.Join(errs...)
}

// ProbePrefix starts Probe's scratch names ("lanes_l" and the pid in hex).
const ProbePrefix = "lanes_l"

// Probe loads, registers and unregisters LEDBAT++ under a scratch name: nil
// when this kernel can run it.
func Probe() error {
	c, err := Load(fmt.Sprintf("%s%x", ProbePrefix, os.Getpid()), 25*time.Millisecond, ShareRule, structops.Auto, nil)
	if err != nil {
		return err
	}
	return c.Close()
}
