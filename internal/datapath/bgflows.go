// bgflows.go: the background UDP class's flow table (lanes_bg_flows, the
// classifier's bgclass.h) seen from the daemon: a socket moved out of
// background takes its flows out, so that its arriving packets are no
// longer policed as background.
package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
)

// ForgetBackgroundFlows removes the background class's non-TCP flows that
// leave from local port sport with protocol proto; it returns how many.
func (h *Host) ForgetBackgroundFlows(proto uint8, sport uint16) (int, error) {
	n := 0
	err := h.use(func() error {
		var (
			k     abi.FlowKey
			v     uint32
			found []abi.FlowKey
		)
		it := h.cls.LanesBgFlows.Iterate()
		for it.Next(&k, &v) {
			if k.Proto == proto && k.Sport == sport {
				found = append(found, k)
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("background flows: %w", err)
		}
		for _, k := range found {
			if err := h.cls.LanesBgFlows.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("background flow: %w", err)
			}
			n++
		}
		return nil
	})
	return n, err
}
