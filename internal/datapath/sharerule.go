// sharerule.go: the parts of the share rule beside a present foreground
// (the background keeps FG_SHARE_TARGET of queue there) that a lab run may
// leave off to pair the rule with what it replaced: the daemon's
// --share-rule-off, a lab switch, not a policy key.
package datapath

import (
	"fmt"
	"strings"

	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
)

// ShareParts are parts of the share rule, as bits.
type ShareParts uint32

const (
	// ShareSlope: LEDBAT++'s decrease above the share target as steep as
	// above its own target (ledbat_core.h's LEDBAT_F_SHARE_SLOPE).
	ShareSlope = ShareParts(ledbat.ShareSlope)
	// ShareDefer: no periodic slowdown while sharing (LEDBAT_F_SHARE_DEFER).
	ShareDefer = ShareParts(ledbat.ShareDefer)
	// ShareGrow: LEDBAT++'s growth below the share target in proportion
	// to the distance to it (LEDBAT_F_SHARE_GROW).
	ShareGrow = ShareParts(ledbat.ShareGrow)
	// ShareDownloads: rLEDBAT shares beside an unharmed foreground as
	// LEDBAT++ does, instead of holding the receive window at the minimum.
	ShareDownloads ShareParts = sockops.RLShareOn
)

var shareNames = []struct {
	name string
	part ShareParts
}{{"slope", ShareSlope}, {"defer", ShareDefer}, {"grow", ShareGrow}, {"download", ShareDownloads}}

// ParseShareParts parses a list of part names (slope, defer, grow, download;
// "all" for every one).
func ParseShareParts(names []string) (ShareParts, error) {
	var p ShareParts
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "all" {
			p |= ShareSlope | ShareDefer | ShareGrow | ShareDownloads
			continue
		}
		found := false
		for _, s := range shareNames {
			if s.name == n {
				p |= s.part
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("share rule part %q: want slope, defer, grow, download or all", n)
		}
	}
	return p, nil
}

// String lists the parts by name ("" for none).
func (p ShareParts) String() string {
	var out []string
	for _, s := range shareNames {
		if p&s.part != 0 {
			out = append(out, s.name)
		}
	}
	return strings.Join(out, ",")
}

// ledbatShare is the LEDBAT++ share rule with the parts in off left off.
func ledbatShare(off ShareParts) uint32 {
	return ledbat.ShareRule &^ uint32(off)
}

// rlShare is sock_ops' rLEDBAT share rule with the parts in off left off
// (0: downloads held at the minimum beside a present foreground).
func rlShare(off ShareParts) uint32 {
	if off&ShareDownloads != 0 {
		return 0
	}
	return sockops.RLShareOn | ledbatShare(off)
}
