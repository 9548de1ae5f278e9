// rates.go: UDP (QUIC) rates from two listings of the daemon's UDP flows:
// each socket's bytes sent and received on the managed interfaces (the
// classifier's counts per local port) over the time between the two
// readings, per flow and summed per lane, as every view shows them.
package udpflow

import "github.com/lanes-net/lanes/internal/lane"

// FillRates sets each socket's rates (UpBps, DownBps, bits/s) in cur from
// its counts in prev, the listing before it; a socket not in prev, or
// counted at the same time, keeps 0.
func FillRates(prev, cur []Flow) {
	before := make(map[uint64]*Flow, len(prev))
	for i := range prev {
		if prev[i].Cookie != 0 && prev[i].CountedAt != 0 {
			before[prev[i].Cookie] = &prev[i]
		}
	}
	for i := range cur {
		f := &cur[i]
		p, ok := before[f.Cookie]
		if !ok || f.CountedAt <= p.CountedAt {
			continue
		}
		sec := float64(f.CountedAt-p.CountedAt) / 1e9
		if f.Sent >= p.Sent {
			f.UpBps = float64(f.Sent-p.Sent) * 8 / sec
		}
		if f.Received >= p.Received {
			f.DownBps = float64(f.Received-p.Received) * 8 / sec
		}
	}
}

// LaneRate is one lane's UDP flows and their rates, bits/s.
type LaneRate struct {
	Flows   int
	UpBps   float64
	DownBps float64
}

// LaneRates sums the flows' rates (FillRates) per lane; the daemon's own
// sockets are left out.
func LaneRates(flows []Flow) map[lane.Lane]LaneRate {
	out := map[lane.Lane]LaneRate{}
	for i := range flows {
		f := &flows[i]
		if f.Daemon || f.Cookie == 0 {
			continue
		}
		r := out[f.Lane]
		r.Flows++
		r.UpBps += f.UpBps
		r.DownBps += f.DownBps
		out[f.Lane] = r
	}
	return out
}
