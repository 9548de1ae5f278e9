// variable.go: the variable-rate link (internal/lab/varlink's sequence)
// as a mahimahi trace.
package emu

import (
	"time"

	"github.com/lanes-net/lanes/internal/lab/varlink"
)

// VariableTrace is steps of seed's variable-link sequence as a trace
// (which repeats after them): in each millisecond of a step, as many
// 1,500-byte opportunities as its rate has delivered whole by then.
func VariableTrace(seed uint64, steps int) *Trace {
	next := varlink.Rates(seed)
	stepMS := uint64(varlink.Step / time.Millisecond)
	t := &Trace{Name: "variable", Period: uint64(steps) * stepMS}
	var credit float64
	for i := range uint64(steps) {
		perMS := next() / 8 / OpportunityBytes / 1000
		for ms := i*stepMS + 1; ms <= (i+1)*stepMS; ms++ {
			for credit += perMS; credit >= 1; credit-- {
				t.MS = append(t.MS, ms)
			}
		}
	}
	return t
}
