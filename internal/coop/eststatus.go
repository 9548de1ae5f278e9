// eststatus.go: the rate estimator's state for status, so a user can see
// why an estimated rate (and the caps from it) sits where it does.
package coop

// EstimateStatus is one direction's estimator state (estimate.go).
type EstimateStatus struct {
	// Phase: "pre-start" (the flows' own slow start, no caps), "startup"
	// (caps doubling) or "cruise" (the best goodput of the last 30 s).
	Phase        string  `json:"phase"`
	BestBits     uint64  `json:"best_bits"`     // best recorded goodput in the window
	Trim         float64 `json:"trim"`          // cruise multiplier of the best (1: none)
	Probing      bool    `json:"probing"`       // the last interval was inside a probe
	FailedProbes int     `json:"failed_probes"` // in a row (the probes' backoff)
	Drained      bool    `json:"drained"`       // a drain lowered it and its queue still stands
	// The last interval's input: the group's goodput and its flows'
	// median srtt/min_rtt (0: none measured)
	GroupGoodputBits uint64  `json:"group_goodput_bits"`
	Inflation        float64 `json:"inflation"`
	// JudgedBits: the last interval's group goodput bounded by the hosts'
	// interfaces (arrivals.go); DrainRefBits: the drain signal's
	// reference, the best of that while the drained queue stood (0: no
	// drain)
	JudgedBits   uint64 `json:"judged_bits"`
	DrainRefBits uint64 `json:"drain_ref_bits,omitempty"`
}

// status reports the estimator's state.
func (e *rateEstimator) status() *EstimateStatus {
	phase := "cruise"
	switch {
	case e.est < minRateBits:
		phase = "pre-start"
	case e.phase == phaseStartup:
		phase = "startup"
	}
	return &EstimateStatus{Phase: phase, BestBits: uint64(e.best()), Trim: e.trimmed(),
		Probing: e.probing, FailedProbes: e.failed, Drained: e.drained,
		GroupGoodputBits: uint64(e.input.goodput), Inflation: e.input.inflation,
		JudgedBits: uint64(e.input.judgedOrGoodput()), DrainRefBits: uint64(e.drainRef)}
}
