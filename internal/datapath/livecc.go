// livecc.go: a live move's congestion control at once. The daemon moves a
// running process's open sockets by cookie (lanes_cookie); sock_ops would
// switch their congestion control and TCP_NOTSENT_LOWAT at each socket's
// next RTT callback (its next ACK: an idle socket waits). Where the kernel
// lets an iter/tcp program call bpf_setsockopt (5.14+), ApplyLive marks
// the moved cookies in lanes_live_pending and walks the namespace's TCP
// sockets once with lanes_live_cc, which applies them with each socket
// locked; elsewhere (capability live_cc off) the callback does it. The
// iterator's link is made once, at load, and kept: a walk is one open and
// read of it (the link alone runs nothing).
package datapath

import (
	"fmt"
	"io"

	"github.com/cilium/ebpf/link"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
)

// loadLive loads the iterator and makes its link; a failure turns off
// CapLiveCC only.
func (h *Host) loadLive(cfg sockops.Config) {
	if _, off := h.off[CapLiveCC]; off {
		return
	}
	p, err := sockops.LoadLive(cfg, h.ops)
	if err != nil {
		h.disable(CapLiveCC, fmt.Errorf("congestion control of moved sockets switched at their next ACK: %w", err))
		return
	}
	it, err := link.AttachIter(link.IterOptions{Program: p})
	if err != nil {
		p.Close()
		h.disable(CapLiveCC, fmt.Errorf("congestion control of moved sockets switched at their next ACK: "+
			"live move iterator: %w", err))
		return
	}
	h.live, h.liveLink = p, it
}

// ApplyLive applies the lanes just set for these TCP sockets (cookie ->
// lane) at once: congestion control and TCP_NOTSENT_LOWAT. It returns
// false when the capability is off (their next ACK applies them).
func (p *CgroupPrograms) ApplyLive(moved map[uint64]lane.Lane) (bool, error) {
	applied := false
	err := p.guard.use(func() error {
		if p.live == nil || len(moved) == 0 {
			return nil
		}
		for c, l := range moved {
			if err := p.ops.LanesLivePending.Put(c, uint32(l)); err != nil {
				return fmt.Errorf("live move of socket %d: %w", c, err)
			}
		}
		r, err := p.live.Open()
		if err != nil {
			return fmt.Errorf("live move iterator: %w", err)
		}
		defer r.Close()
		if _, err := io.Copy(io.Discard, r); err != nil {
			return fmt.Errorf("live move iterator: %w", err)
		}
		for c := range moved { // sockets that closed meanwhile
			_ = p.ops.LanesLivePending.Delete(c)
		}
		applied = true
		return nil
	})
	return applied, err
}
