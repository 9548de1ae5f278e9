// account.go: each managed interface's account per direction (the
// datapath's FgYield.Accounts) in status.
package daemon

import (
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/yield"
)

// accounter is a host datapath that keeps each link's account
// (*datapath.FgYield; the in-memory test host keeps none).
type accounter interface {
	Accounts() (map[int][2]datapath.LinkAccount, error)
}

// accountsNow are the host's accounts by ifindex; nil without them (or
// where they cannot be read: status goes on without).
func (h *apiHandlers) accountsNow() map[int][2]datapath.LinkAccount {
	a := h.kernel.host.roles().accounts
	if a == nil {
		return nil
	}
	all, err := a.Accounts()
	if err != nil {
		h.log.Debug("status: the links' accounts", "err", err)
	}
	return all
}

// accountOf is interface ifindex's account in status, up then down; nil
// where the host keeps none for it. upBps are the lanes' upload rates,
// downCap the download capacity estimate (bit/s, 0: not measured).
func accountOf(all map[int][2]datapath.LinkAccount, ifindex int, upBps map[lane.Lane]uint64,
	downCap uint64) []api.LinkAccount {
	a, ok := all[ifindex]
	if !ok {
		return nil
	}
	if a[yield.Down].CapacityBps == 0 {
		a[yield.Down].CapacityBps = downCap
	}
	out := make([]api.LinkAccount, 0, len(a))
	for d, la := range a {
		la := api.LinkAccount{Dir: yield.DirNames[d], CapacityBps: la.CapacityBps, QueueOwner: la.Owner,
			TestedAgoMS: la.TestedAgo.Milliseconds(), Tests: la.Tests, NotOurs: la.NotOurs, Held: la.Held, Why: la.Why}
		if d == yield.Up {
			la.Shares = sharesOf(upBps, la.CapacityBps)
		}
		out = append(out, la)
	}
	return out
}

// sharesOf are each lane's rate and its share of capacity (bit/s); nil
// without rates.
func sharesOf(bps map[lane.Lane]uint64, capacity uint64) []api.LaneShare {
	if bps == nil {
		return nil
	}
	out := make([]api.LaneShare, 0, len(lane.All))
	for _, l := range lane.All {
		s := api.LaneShare{Lane: l, Bps: bps[l]}
		if capacity > 0 {
			s.Share = float64(bps[l]) / float64(capacity)
		}
		out = append(out, s)
	}
	return out
}
