// Package lab is the set of lanes' lab experiments, as `lanes lab` runs
// them: importing it links every experiment package in, and each registers
// itself with the testbed (testbed.Register) from an init function.
//
// The testbed (internal/lab/testbed: hosts, links, helpers, statistics,
// results) is shared; each experiment package depends on it and never on
// another experiment.
package lab

import (
	_ "github.com/lanes-net/lanes/internal/lab/accuracy" // accuracy, tun-probe
	_ "github.com/lanes-net/lanes/internal/lab/coop"     // coop, coop-dynamics, coop-mixed, apps
	_ "github.com/lanes-net/lanes/internal/lab/deadline" // deadline
	_ "github.com/lanes-net/lanes/internal/lab/lbe"      // lbe, lbe-overhead, lbe-feedback, lbe-remote, lbe-switch
	_ "github.com/lanes-net/lanes/internal/lab/rt"       // rt
)
