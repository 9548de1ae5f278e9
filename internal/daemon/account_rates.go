// account_rates.go: the account's rates between status calls: each lane's
// upload rate (its tc class bytes) and the download capacity estimate
// (datapath.DownEstimate, the held-ACK pacer's rule too).
package daemon

import (
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
)

// rateMinInterval: status calls closer than this reuse the last rates (a
// short interval's rate is mostly noise).
const rateMinInterval = 500 * time.Millisecond

// accountRates keeps, per ifindex, the last counters and rates.
type accountRates struct {
	mu  sync.Mutex
	per map[int]*ifaceRates
}

// ifaceRates is one interface's: the lanes' counters at the last sample,
// their upload rates over the interval that ended there (bit/s), and the
// download estimate.
type ifaceRates struct {
	at      time.Time
	laneB   map[lane.Lane]uint64
	laneBps map[lane.Lane]uint64
	down    datapath.DownEstimate
}

// observe takes interface ifindex's counters at now (lanes' bytes out; rx
// the interface's bytes in, rxOK false where not read) and returns each
// lane's upload rate and the download capacity estimate, bit/s.
func (r *accountRates) observe(ifindex int, now time.Time, lanes map[lane.Lane]datapath.LaneStats,
	rx uint64, rxOK bool) (map[lane.Lane]uint64, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.per == nil {
		r.per = map[int]*ifaceRates{}
	}
	ir := r.per[ifindex]
	if ir == nil {
		ir = &ifaceRates{}
		r.per[ifindex] = ir
	}
	if ir.at.IsZero() || now.Sub(ir.at) >= rateMinInterval {
		ir.advance(now, lanes, rx, rxOK)
	}
	return ir.laneBps, ir.down.At(now)
}

// advance ends an interval at now: the lanes' rates over it and the
// arrivals' reading of the download estimate.
func (ir *ifaceRates) advance(now time.Time, lanes map[lane.Lane]datapath.LaneStats, rx uint64, rxOK bool) {
	dt := now.Sub(ir.at).Seconds()
	first := ir.at.IsZero()
	rate := func(cur, prev uint64) uint64 {
		if first || cur < prev || dt <= 0 {
			return 0
		}
		return uint64(float64(cur-prev) * 8 / dt)
	}
	bps := map[lane.Lane]uint64{}
	cur := map[lane.Lane]uint64{}
	for _, l := range lane.All {
		cur[l] = lanes[l].Bytes
		bps[l] = rate(cur[l], ir.laneB[l])
	}
	if rxOK {
		ir.down.Add(now, rx)
	} else {
		ir.down.Miss()
	}
	if first {
		bps = nil
	}
	ir.at, ir.laneB, ir.laneBps = now, cur, bps
}
