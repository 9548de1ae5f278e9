// lberemote_signal.go: which signal steers the background during
// lbe-remote's steady and churn steps, read from the phone's daemon: its
// `background` component (internal/yield: free, sharing, or held and why)
// and, for the QUIC/UDP class, its `background-udp` component (the queue
// the controller reads and the class's rate against its link estimate), sampled
// every signalEvery. The run keeps the share of samples per state and the
// medians, so a low share beside a foreground names what held it.
package lbe

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/yield"
)

// signalEvery is how often the daemon's state is read.
const signalEvery = 100 * time.Millisecond

// RemoteSignal is the daemon's background state over one step.
type RemoteSignal struct {
	// States: share of the samples per state ("free", "sharing",
	// "held: harm up" (a delay; the harmed directions, up, down or
	// up+down: background in the others is not held), "held: harm up
	// (cwnd-limited)", "held: opening", "held: untold").
	States  map[string]float64 `json:"states,omitempty"`
	Samples int                `json:"samples"`
	// The QUIC/UDP controller's (samples with a running episode): the
	// queue it read, ms, and the class's measured rate ÷ its link
	// estimate, medians.
	UDPQueueMs  float64 `json:"udp_queue_ms,omitempty"`
	UDPRateLink float64 `json:"udp_rate_of_link,omitempty"`
}

// sampleSignal reads the daemon's background state every signalEvery
// until the returned function is called, which returns the summary (nil
// without a daemon).
func (rb *remoteBed) sampleSignal(ctx context.Context) func() *RemoteSignal {
	if !rb.m.Lanes || rb.sock == "" {
		return func() *RemoteSignal { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg              sync.WaitGroup
		counts          = map[string]int{}
		n               int
		queues, ofLinks []float64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(signalEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			state, q, ofLink, ok := readSignal(rb.sock)
			if !ok {
				continue
			}
			n++
			counts[state]++
			if q >= 0 {
				queues, ofLinks = append(queues, q), append(ofLinks, ofLink)
			}
		}
	}()
	return func() *RemoteSignal {
		cancel()
		wg.Wait()
		s := &RemoteSignal{States: map[string]float64{}, Samples: n}
		for k, v := range counts {
			s.States[k] = float64(v) / float64(n)
		}
		s.UDPQueueMs, s.UDPRateLink = median(queues), median(ofLinks)
		return s
	}
}

// readSignal asks the daemon once: the yield's state, and (q ≥ 0) the
// QUIC/UDP controller's queue in ms and measured rate ÷ link estimate.
func readSignal(sock string) (state string, q, ofLink float64, ok bool) {
	c, err := client.Dial(sock)
	if err != nil {
		return "", 0, 0, false
	}
	defer c.Close()
	raw, err := c.Component("background")
	if err != nil {
		return "", 0, 0, false
	}
	var ys yield.Status
	if json.Unmarshal(raw, &ys) != nil {
		return "", 0, 0, false
	}
	state = yield.ModeFree
	for _, is := range ys.Interfaces { // the phone has one interface
		state = is.Mode
		if is.Mode == yield.ModeHeld {
			state += ": " + is.Cause
			if len(is.Harmed) > 0 { // a harm holds only its directions
				state += " " + strings.Join(is.Harmed, "+")
			}
			if is.Cause == yield.CauseHarm && strings.Contains(is.Signal, "cwnd-limited") {
				state += " (cwnd-limited)" // else a delay over the threshold
			}
		}
	}
	q = -1
	if raw, err := c.Component("background-udp"); err == nil {
		var us bgudp.Status
		if json.Unmarshal(raw, &us) == nil {
			for _, e := range us.Running {
				q = float64(e.Queue) / 1e6
				if e.Link > 0 {
					ofLink = float64(e.Measured) / float64(e.Link)
				}
			}
		}
	}
	return state, q, ofLink, true
}

// median of v (not sorted in place), as the lab's other figures: testbed.Percentile.
func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return testbed.Percentile(s, 50)
}

// signalSum adds RemoteSignals over rounds.
type signalSum struct {
	states                map[string]float64
	runs, udpRuns         int
	udpQueueMs, udpOfLink float64
}

func (s *signalSum) add(r *RemoteSignal) {
	if r == nil || r.Samples == 0 {
		return
	}
	if s.states == nil {
		s.states = map[string]float64{}
	}
	for k, v := range r.States {
		s.states[k] += v
	}
	s.runs++
	if r.UDPQueueMs > 0 || r.UDPRateLink > 0 {
		s.udpQueueMs += r.UDPQueueMs
		s.udpOfLink += r.UDPRateLink
		s.udpRuns++
	}
}

// states is the mean share per state, the largest first ("held: harm
// 72%, sharing 28%"); "-" without samples.
func (s signalSum) statesText() string {
	if s.runs == 0 {
		return "-"
	}
	keys := make([]string, 0, len(s.states))
	for k := range s.states {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if s.states[keys[i]] != s.states[keys[j]] {
			return s.states[keys[i]] > s.states[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+pcts(s.states[k]/float64(s.runs)))
	}
	return strings.Join(parts, ", ")
}

// udpText is the QUIC/UDP controller's median queue and rate ÷ link.
func (s signalSum) udpText() string {
	if s.udpRuns == 0 {
		return "-"
	}
	n := float64(s.udpRuns)
	return fmt.Sprintf("%.1f ms, %.2f", s.udpQueueMs/n, s.udpOfLink/n)
}

// signalTable: per lanes cell and steady foreground kind, the daemon's
// background state beside the steady foreground, and (on the cell's
// first row) beside the churn; nil if no run read it.
func signalTable(cells []remoteCell) *testbed.Table {
	t := testbed.Table{Title: "The daemon's background state (its background component: free, sharing, held and why), share of samples every " + signalEvery.String() +
		" over the steady and churn windows; the QUIC/UDP controller's queue and the class's rate ÷ its link estimate, medians",
		Columns: []string{"link", "background", "transport", "method", "steady fg", "steady: state", "steady: UDP queue, rate ÷ link", "churn: state", "churn: UDP queue, rate ÷ link"}}
	for _, x := range cells {
		for i, s := range x.Steady {
			if s.Signal.runs == 0 && x.ChurnSignal.runs == 0 {
				continue
			}
			churn := []string{x.ChurnSignal.statesText(), x.ChurnSignal.udpText()}
			if i > 0 {
				churn = []string{"", ""}
			}
			t.Rows = append(t.Rows, append([]string{x.Link, x.BGDir, orDash(x.Transport), x.Method, s.Kind,
				s.Signal.statesText(), s.Signal.udpText()}, churn...))
		}
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return &t
}
