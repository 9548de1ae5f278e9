// bgflows.go: the background UDP class's flow table (lanes_bg_flows, the
// classifier's bgclass.h) seen from the daemon: a socket moved out of
// background takes its flows out, so that its arriving packets are no
// longer policed as background; status, the monitor and the dashboard
// list its flows (BackgroundFlows).
package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
)

// ForgetBackgroundFlows removes the background class's non-TCP flows that
// leave from one of the local ports sports with protocol proto; it returns
// how many. One walk of the table for all the ports: a walk per port made
// a move of 1,024 UDP sockets out of background 1,024 walks.
func (b *BackgroundClass) ForgetBackgroundFlows(proto uint8, sports map[uint16]bool) (int, error) {
	n := 0
	if len(sports) == 0 {
		return 0, nil
	}
	err := b.guard.use(func() error {
		var (
			k     abi.FlowKey
			v     uint32
			found []abi.FlowKey
		)
		it := b.cls.LanesBgFlows.Iterate()
		for it.Next(&k, &v) {
			if k.Proto == proto && sports[k.Sport] {
				found = append(found, k)
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("background flows: %w", err)
		}
		for _, k := range found {
			if err := b.cls.LanesBgFlows.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("background flow: %w", err)
			}
			n++
		}
		return nil
	})
	return n, err
}

// BgFlow is one entry of the background class's flow table: a non-TCP
// flow the classifier saw leave in background, by its egress 5-tuple.
type BgFlow struct {
	Key     FlowKey // Src, SPort: local; Dst, DPort: remote
	Ifindex int     // the interface it left by
}

// BackgroundFlows lists the background class's flow table (at most its
// 4,096 entries; the least recently used go first when it is full).
func (b *BackgroundClass) BackgroundFlows() ([]BgFlow, error) {
	var out []BgFlow
	err := b.guard.use(func() error {
		var (
			k abi.FlowKey
			v uint32
		)
		it := b.cls.LanesBgFlows.Iterate()
		for it.Next(&k, &v) {
			out = append(out, BgFlow{Key: FlowKey{Src: k.Src(), Dst: k.Addr(), DPort: k.Dport, SPort: k.Sport, Proto: k.Proto}, Ifindex: int(v)})
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("background flows: %w", err)
		}
		return nil
	})
	return out, err
}
