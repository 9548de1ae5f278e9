// Package varlink is the variable-rate link's sequence: a rate that steps
// every 500 ms through a seeded sequence between 1.5 and 16 Mbit/s, as a
// cellular link's does. The lab's emulated "variable" link (a mahimahi
// trace, internal/lab/emu's VariableTrace) and the tests' TBF
// (internal/testutil's StartVariableLink) follow it, so that their figures
// are of one link.
package varlink

import (
	"math/rand/v2"
	"time"
)

// The link's shape.
const (
	MinBps = 1.5e6
	MaxBps = 16e6
	Step   = 500 * time.Millisecond
	// Seed is the sequence the lab's link and the tests' follow.
	Seed = 7
)

// Rates returns seed's sequence: each call the next step's rate, bit/s,
// uniform in [MinBps, MaxBps].
func Rates(seed uint64) func() float64 {
	rng := rand.New(rand.NewPCG(seed, 0x7661726c696e6b))
	return func() float64 { return MinBps + rng.Float64()*(MaxBps-MinBps) }
}
