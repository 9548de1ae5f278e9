// stats.go: statistics over a recorded series: per-host and total goodput,
// Jain's index per interval (of the hosts active in it) and over a window,
// RTT and the medium's figures over a window.
package coop

import (
	"sort"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// coopStats summarises a series over [from, to) seconds for the given hosts.
type coopStats struct {
	TotalMbit   float64   `json:"total_mbit"`
	PerHostMbit []float64 `json:"per_host_mbit"`
	JainStep    float64   `json:"jain_per_interval"`     // Mean of per-interval indices
	JainAir     float64   `json:"jain_per_interval_air"` // the same over the bytes leaving the medium
	JainRun     float64   `json:"jain_run"`
	RTTms       float64   `json:"rtt_median_ms"`
	RTTp95ms    float64   `json:"rtt_p95_ms"`
	// The shared medium: share of the time its serialiser was idle, and
	// its queue's median over the samples
	IdlePct    float64 `json:"medium_idle_pct"`
	QueueP50KB float64 `json:"medium_queue_p50_kb"`
	OtherMbit  float64 `json:"medium_other_mbit"` // non-TCP traffic on the medium (announcements)
	Retrans    uint32  `json:"retrans"`
	// The hosts' per-step pattern over their air bytes (cooppattern.go):
	// coefficient of variation, autocorrelation at 4 and 7 steps.
	HostCV float64 `json:"host_cv"`
	ACF4   float64 `json:"acf_4"`
	ACF7   float64 `json:"acf_7"`
	// Medium dcf: share of the time the air carried collisions, and of
	// the frames sent (attempts) that collided.
	AirLostPct  float64 `json:"medium_air_lost_pct,omitempty"`
	CollidedPct float64 `json:"medium_collided_pct,omitempty"`
}

// interval is how long sample k covers: since the previous sample (or the
// start), in seconds.
func (s *coopSeries) interval(k int) float64 {
	if k == 0 {
		return s.T[0]
	}
	return s.T[k] - s.T[k-1]
}

// maxInterval is the longest time between two samples (a recorder that
// fell behind its step on a busy machine).
func (s *coopSeries) maxInterval() float64 {
	m := 0.0
	for k := range s.T {
		m = max(m, s.interval(k))
	}
	return m
}

func (s *coopSeries) stats(hosts []int, from, to float64) coopStats {
	var st coopStats
	first, last := s.window(from, to)
	secs := s.hostStats(&st, hosts, first, last)
	s.mediumStats(&st, first, last, secs)
	if n := len(s.Samples); n > 0 {
		for _, i := range hosts {
			st.Retrans += s.Samples[n-1][i].Retrans
		}
	}
	return st
}

// window is the first and last sample in (from, to] seconds, -1 for none.
func (s *coopSeries) window(from, to float64) (first, last int) {
	first, last = -1, -1
	for k := range s.Samples {
		if s.T[k] <= from || s.T[k] > to {
			continue
		}
		if first < 0 {
			first = k
		}
		last = k
	}
	return first, last
}

// hostStats fills the hosts' goodput, Jain's indices and RTTs over samples
// first..last, and returns how long they cover in seconds.
func (s *coopSeries) hostStats(st *coopStats, hosts []int, first, last int) float64 {
	st.PerHostMbit = make([]float64, len(hosts))
	var jains, airs, rtts []float64
	var steps [][]float64
	secs := 0.0
	for k := first; k >= 0 && k <= last; k++ {
		// the bytes are those since the previous sample, which may be more
		// than a step ago when the machine is busy
		secs += s.interval(k)
		x, a := make([]float64, len(hosts)), make([]float64, len(hosts))
		for j, i := range hosts {
			row := s.Samples[k][i]
			x[j], a[j] = float64(row.Bytes), float64(row.Air)
			st.PerHostMbit[j] += float64(row.Bytes) * 8
			if row.SRTTms > 0 {
				rtts = append(rtts, row.SRTTms)
			}
		}
		jains, airs = append(jains, testbed.Jain(x)), append(airs, testbed.Jain(a))
		steps = append(steps, a)
	}
	pt := pattern(steps)
	st.HostCV, st.ACF4, st.ACF7 = pt.CV, pt.ACFShort, pt.ACFLong
	if secs > 0 {
		for j := range st.PerHostMbit {
			st.PerHostMbit[j] /= secs * 1e6
			st.TotalMbit += st.PerHostMbit[j]
		}
	}
	st.JainRun = testbed.Jain(st.PerHostMbit)
	st.JainStep, st.JainAir = testbed.Mean(jains), testbed.Mean(airs)
	sort.Float64s(rtts)
	if len(rtts) > 0 {
		st.RTTms = testbed.Percentile(rtts, 50)
		st.RTTp95ms = testbed.Percentile(rtts, 95)
	}
	return secs
}

// mediumStats fills the shared medium's figures over samples first..last
// (secs long): idle time, other traffic, queue, and the 802.11 air lost
// and collisions. Each series may be absent (older results, fifo beds).
func (s *coopSeries) mediumStats(st *coopStats, first, last int, secs float64) {
	if first < 0 || secs <= 0 {
		return
	}
	if last < len(s.MediumIdle) {
		st.IdlePct = 100 * delta(s.MediumIdle, first, last) / secs
	}
	if last < len(s.MediumOther) {
		st.OtherMbit = delta(s.MediumOther, first, last) * 8 / secs / 1e6
	}
	if last < len(s.MediumQueue) {
		queue := make([]float64, 0, last-first+1)
		for k := first; k <= last; k++ {
			queue = append(queue, float64(s.MediumQueue[k])/1000)
		}
		sort.Float64s(queue)
		st.QueueP50KB = testbed.Percentile(queue, 50)
	}
	if last < len(s.MediumLost) {
		lost := delta(s.MediumLost, first, last)
		coll := delta(s.MediumCollided, first, last)
		frames := delta(s.MediumFrames, first, last)
		st.AirLostPct = 100 * lost / secs
		if coll+frames > 0 {
			st.CollidedPct = 100 * coll / (coll + frames)
		}
	}
}

// delta is how much a cumulative series grew over samples first..last
// (from the sample before first, or 0).
func delta[T float64 | uint64 | int64](v []T, first, last int) float64 {
	d := float64(v[last])
	if first > 0 {
		d -= float64(v[first-1])
	}
	return d
}

// What activeJain counts of a host's interval: the bytes its reader
// counted, or its payload leaving the shared medium.
func appBytes(h hostSample) int64 { return h.Bytes }

func airBytes(h hostSample) int64 { return h.Air }

// activeJain is the mean per-interval Jain index over the hosts that
// received data in that interval (as counted by bytes).
func activeJain(s *coopSeries, from, to float64, bytes func(hostSample) int64) float64 {
	var sum float64
	k := 0
	for i, row := range s.Samples {
		if s.T[i] <= from || s.T[i] > to {
			continue
		}
		var x []float64
		for _, h := range row {
			if b := bytes(h); b > 0 {
				x = append(x, float64(b))
			}
		}
		if len(x) > 0 {
			sum += testbed.Jain(x)
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}
