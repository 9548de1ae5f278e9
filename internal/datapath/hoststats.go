// hoststats.go: the host's BPF counters for status (the packets the
// classifier put in each lane, by how it found the lane; sock_ops events)
// with its congestion controls' and capabilities' state, and TryClassify,
// one frame through the classifier for tests and diagnostics.
package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
)

// HostStats are the host's BPF counters.
type HostStats struct {
	// Classified[kind][lane]: packets the classifier put in each lane, by
	// how it found the lane (all interfaces together).
	Classified   map[string]map[lane.Lane]uint64 `json:"classified"`
	Sockops      map[string]uint64               `json:"sockops"` // sock_ops events (empty without sock_ops)
	CapCC        CapCCStatus                     `json:"cap_cc"`
	Background   BackgroundCCStatus              `json:"background_cc"`
	Capabilities map[Capability]string           `json:"capabilities"`
}

// Stats reads the host's counters.
func (h *Host) Stats() (HostStats, error) {
	s := HostStats{Classified: map[string]map[lane.Lane]uint64{}, CapCC: h.Caps.CapCC(), Background: h.CCs.BackgroundCC(), Capabilities: h.Capabilities()}
	err := h.guard.use(func() error {
		cls, err := classifier.ReadStats(h.cls.LanesClsStats)
		if err != nil {
			return err
		}
		for k := classifier.Kind(0); int(k) < classifier.NumKinds; k++ {
			m := map[lane.Lane]uint64{}
			for _, l := range lane.All {
				m[l] = cls[classifier.StatsIndex(k, l)].Packets
			}
			s.Classified[k.String()] = m
		}
		if h.ops == nil {
			return h.pinnedOpsCounters(&s) // the pinned sock_ops' (pinned.go)
		}
		s.Sockops, err = sockops.ReadCounters(h.ops.LanesOpsStats)
		return err
	})
	return s, err
}

// ByKind sums the classified packets per match kind.
func (s HostStats) ByKind() map[string]uint64 {
	out := map[string]uint64{}
	for k, m := range s.Classified {
		for _, n := range m {
			out[k] += n
		}
	}
	return out
}

// TryClassify runs the host's classifier on one Ethernet frame with
// BPF_PROG_TEST_RUN (the kernel's dummy socket: uid 0, the caller's cgroup)
// and returns the lane and match kind it chose, read from the classifier's
// counters: traffic through this host's trees at the same moment can blur
// the answer, so it is meant for tests and diagnostics on an idle host.
func (h *Host) TryClassify(frame []byte) (lane.Lane, classifier.Kind, error) {
	var l lane.Lane
	var k classifier.Kind
	err := h.guard.use(func() error {
		before, err := classifier.ReadStats(h.cls.LanesClsStats)
		if err != nil {
			return err
		}
		if _, err := h.cls.LanesClassify.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			return fmt.Errorf("classifier test run: %w", err)
		}
		after, err := classifier.ReadStats(h.cls.LanesClsStats)
		if err != nil {
			return err
		}
		for i := range after {
			if after[i].Packets != before[i].Packets {
				k, l = classifier.Kind(i/abi.LaneSlots), lane.Lane(i%abi.LaneSlots)
				return nil
			}
		}
		return errors.New("classifier counted nothing")
	})
	return l, k, err
}
