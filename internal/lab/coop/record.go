// record.go: what a run records every step (coopSeries): each host's
// goodput, cwnd, caps and RTT from the sender's side (the server's view of
// downloads) and the daemon's status, and the medium's queue and counters.
package coop

import (
	"context"
	"net/netip"
	"sort"
	"time"

	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// senderView is one host's bulk flows as their senders see them: the
// hosts' own sockets uploading, the server's downloading to it.
type senderView struct {
	rtt     float64 // summed srtt, ms, over k flows with data in flight
	k       int
	cwnd    uint32
	sndWnd  uint32 // largest window the receiver offers (downloads)
	retrans map[uint64]uint32
}

// serverSide samples the server's flows to the hosts (downloads) by host.
func (cb *coopBed) serverSide(fl []tcpmon.Flow) map[*coopHost]*senderView {
	out := map[*coopHost]*senderView{}
	for _, f := range fl {
		src, err := netip.ParseAddrPort(f.Src)
		if err != nil || src.Port() != coopDownPort {
			continue
		}
		dst, err := netip.ParseAddrPort(f.Dst)
		if err != nil {
			continue
		}
		h := cb.byAddr[dst.Addr().Unmap()]
		if h == nil {
			continue
		}
		v := out[h]
		if v == nil {
			v = &senderView{retrans: map[uint64]uint32{}}
			out[h] = v
		}
		v.retrans[f.Cookie] = f.TotalRetrans
		if f.State == "ESTAB" && f.SRTT > 0 && f.Unacked > 0 {
			v.rtt += float64(f.SRTT) / 1000
			v.k++
			v.cwnd = max(v.cwnd, f.Cwnd)
			v.sndWnd = max(v.sndWnd, f.SndWnd)
		}
	}
	return out
}

// hostSample is one measurement interval of one host.
type hostSample struct {
	Bytes   int64   `json:"bytes"`
	Air     int64   `json:"air_bytes"` // TCP payload leaving the shared medium (coopair.go)
	SRTTms  float64 `json:"srtt_ms"`   // Mean over its bulk flows (0: none)
	Cwnd    uint32  `json:"cwnd"`
	Retrans uint32  `json:"retrans"` // cumulative, its flows to the server
	N       int     `json:"n,omitempty"`
	Cap     uint32  `json:"cap,omitempty"`
	Capping bool    `json:"capping,omitempty"`
	// CapChanges: its active flows' cap changes since each was first seen
	// (the daemon's counters: cwnd caps up, downlink caps down)
	CapChanges uint64 `json:"cap_changes,omitempty"`
	// The daemon's rate for the direction, its estimator's state (rate
	// estimated) and why it is not capping: what a run's caps followed,
	// interval by interval, without a special build
	RateBits uint64               `json:"rate_bits,omitempty"`
	Estimate *coop.EstimateStatus `json:"estimate,omitempty"`
	NotWhy   string               `json:"not_capping,omitempty"`
	// Ack: the downloads' ACK class (direction down): its rate, what it
	// sent over the last RTT
	Ack *coop.AckClassStatus `json:"ack_class,omitempty"`
}

// coopSeries is the per-interval record of a run.
type coopSeries struct {
	Step    time.Duration  `json:"step_ns"`
	T       []float64      `json:"t_s"`
	Samples [][]hostSample `json:"samples"` // [interval][host]
	// The shared medium at each sample: its queue (bytes) and how long its
	// serialiser has been idle since the bed started (s, cumulative).
	MediumQueue []int     `json:"medium_queue_bytes"`
	MediumIdle  []float64 `json:"medium_idle_s"`
	// non-TCP bytes (the daemons' announcements) the medium carried in
	// the bed's direction since the bed started (cumulative)
	MediumOther []int64 `json:"medium_other_bytes"`
	// Medium dcf, cumulative at each sample: air time lost to collisions
	// (s), frames in collisions, frames delivered.
	MediumLost     []float64 `json:"medium_lost_s,omitempty"`
	MediumCollided []uint64  `json:"medium_collided,omitempty"`
	MediumFrames   []uint64  `json:"medium_frames,omitempty"`
	// What a stalled testbed would show (accuracy/stalls.go): the hosts' summed
	// retransmission timeouts and spurious ones during the run, and the
	// shared medium's late deliveries (its uplink queues summed).
	RTOs         int64         `json:"rto"`
	SpuriousRTOs int64         `json:"spurious_rto"`
	Up           emu.LinkStats `json:"medium_up"`
	Down         emu.LinkStats `json:"medium_down"`
	DCF          *emu.DCFStats `json:"dcf,omitempty"` // Medium dcf, at the end
}

// hostsTCPExt sums a TcpExt counter over the hosts.
func (cb *coopBed) hostsTCPExt(names ...string) []int64 {
	v := make([]int64, len(names))
	for _, h := range cb.hosts {
		m, err := testbed.TCPExt(h.node)
		if err != nil {
			continue
		}
		for i, n := range names {
			v[i] += m[n]
		}
	}
	return v
}

// record samples every host each step until ctx ends or dur has passed;
// it fails if a daemon stops answering.
func (cb *coopBed) record(ctx context.Context, step, dur time.Duration, tick func(time.Duration)) (*coopSeries, error) {
	s := &coopSeries{Step: step}
	prev, prevAir := make([]int64, len(cb.hosts)), make([]int64, len(cb.hosts))
	now, nowAir := make([]int64, len(cb.hosts)), make([]int64, len(cb.hosts))
	retr := make([]map[uint64]uint32, len(cb.hosts))
	for i := range retr {
		retr[i] = map[uint64]uint32{}
	}
	rto0 := cb.hostsTCPExt("TCPTimeouts", "TCPSpuriousRTOs")
	defer func() {
		rto := cb.hostsTCPExt("TCPTimeouts", "TCPSpuriousRTOs")
		s.RTOs, s.SpuriousRTOs = rto[0]-rto0[0], rto[1]-rto0[1]
		s.Up, s.Down = sumLinkStats(cb.ups), cb.down.Stats()
		if cb.dcf != nil {
			st := cb.dcf.Stats()
			s.DCF = &st
		}
	}()
	start := time.Now()
	t := time.NewTicker(step)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		// every host's counters at one instant, before the slower samples
		for i, h := range cb.hosts {
			now[i], nowAir[i] = h.bytes.Load(), h.air.Load()
		}
		el := time.Since(start)
		if tick != nil {
			tick(el)
		}
		row := make([]hostSample, len(cb.hosts))
		var srv map[*coopHost]*senderView
		if cb.cfg.Down {
			if fl, err := cb.srvMon.Sample(); err == nil {
				srv = cb.serverSide(fl)
			}
		}
		for i, h := range cb.hosts {
			row[i].Bytes, row[i].Air = now[i]-prev[i], nowAir[i]-prevAir[i]
			prev[i], prevAir[i] = now[i], nowAir[i]
			cb.senderSide(h, srv, retr[i], &row[i])
			for _, v := range retr[i] {
				row[i].Retrans += v
			}
			if h.api != nil {
				if err := cb.daemonSide(h, &row[i]); err != nil {
					return s, err
				}
			}
		}
		s.T = append(s.T, el.Seconds())
		s.Samples = append(s.Samples, row)
		cb.sampleMedium(s)
		if el >= dur {
			break
		}
	}
	return s, nil
}

// senderSide fills a host's sample from the senders' sockets: the
// server's for downloads (srv), the host's own monitor for uploads; the
// Mean srtt and largest cwnd of its flows with data in flight, and each
// flow's retransmissions into retr.
func (cb *coopBed) senderSide(h *coopHost, srv map[*coopHost]*senderView, retr map[uint64]uint32, row *hostSample) {
	if cb.cfg.Down {
		if v := srv[h]; v != nil {
			for ck, r := range v.retrans {
				retr[ck] = r
			}
			if v.k > 0 {
				row.SRTTms = v.rtt / float64(v.k)
			}
			row.Cwnd = v.cwnd
		}
		return
	}
	fl, err := h.mon.Sample()
	if err != nil {
		return
	}
	var rtt float64
	k := 0
	for _, f := range fl {
		if !isServerFlow(f.Dst, cb.server.Addr) {
			continue
		}
		retr[f.Cookie] = f.TotalRetrans
		if f.State == "ESTAB" && f.SRTT > 0 && f.Unacked > 0 {
			rtt += float64(f.SRTT) / 1000
			k++
			row.Cwnd = max(row.Cwnd, f.Cwnd)
		}
	}
	if k > 0 {
		row.SRTTms = rtt / float64(k)
	}
}

// daemonSide fills a lanes host's sample from its daemon's coop status in
// the bed's direction: N, capping (or why not), rate, estimate, cap and
// cap changes.
func (cb *coopBed) daemonSide(h *coopHost, row *hostSample) error {
	st, err := h.coopStatus()
	if err != nil {
		return err
	}
	row.N, row.Capping, row.RateBits, row.Estimate, row.NotWhy = st.N, st.Capping, st.RateBits, st.Estimate, st.Reason
	if cb.cfg.Down {
		d := st.Down
		row.N, row.Capping, row.RateBits, row.Estimate, row.NotWhy = d.N, d.Capping, d.RateBits, d.Estimate, d.Reason
		row.Ack = d.AckClass
	}
	if row.Capping {
		row.NotWhy = ""
	}
	row.Cap = flowsCap(st, cb.cfg.Down)
	row.CapChanges = flowsCapChanges(st, cb.cfg.Down)
	return nil
}

// sampleMedium appends the medium's queue, other traffic, idle time and
// (802.11) air lost, collisions and frames to the series.
func (cb *coopBed) sampleMedium(s *coopSeries) {
	s.MediumQueue = append(s.MediumQueue, cb.mediumQueue())
	s.MediumOther = append(s.MediumOther, cb.other.Load())
	if cb.dcf == nil {
		s.MediumIdle = append(s.MediumIdle, cb.mediumLinks()[0].Stats().Idle.Seconds())
		return
	}
	st := cb.dcf.Stats()
	s.MediumIdle = append(s.MediumIdle, st.Idle.Seconds())
	s.MediumLost = append(s.MediumLost, st.AirLost.Seconds())
	s.MediumCollided = append(s.MediumCollided, st.Collided)
	s.MediumFrames = append(s.MediumFrames, st.Successes)
}

// mediumLinks are the medium's queues in the bed's direction: the AP's
// downlink for downloads, else the uplink (fifo) or every station's.
func (cb *coopBed) mediumLinks() []*emu.Link {
	if cb.cfg.Down {
		return []*emu.Link{cb.down}
	}
	return cb.ups
}

// mediumQueue is what waits in the medium's queues in the bed's
// direction, bytes.
func (cb *coopBed) mediumQueue() int {
	q := 0
	for _, l := range cb.mediumLinks() {
		q += l.QueueBytes()
	}
	return q
}

// sumLinkStats adds up links' counters (the peaks and lateness: the
// largest; the stalls: all, in time order).
func sumLinkStats(ls []*emu.Link) emu.LinkStats {
	var s emu.LinkStats
	for _, l := range ls {
		x := l.Stats()
		s.EnqPackets, s.EnqBytes = s.EnqPackets+x.EnqPackets, s.EnqBytes+x.EnqBytes
		s.DropTail, s.DropLoss, s.DropRetry = s.DropTail+x.DropTail, s.DropLoss+x.DropLoss, s.DropRetry+x.DropRetry
		s.OutPackets, s.OutBytes = s.OutPackets+x.OutPackets, s.OutBytes+x.OutBytes
		s.MaxQueueBytes, s.MaxQueueP = max(s.MaxQueueBytes, x.MaxQueueBytes), max(s.MaxQueueP, x.MaxQueueP)
		s.Idle += x.Idle
		s.Opportunities, s.UsedOpportunities = s.Opportunities+x.Opportunities, s.UsedOpportunities+x.UsedOpportunities
		s.MaxLate = max(s.MaxLate, x.MaxLate)
		s.LatePackets, s.StallEvents = s.LatePackets+x.LatePackets, s.StallEvents+x.StallEvents
		s.StallsAt = append(s.StallsAt, x.StallsAt...)
	}
	sort.Slice(s.StallsAt, func(i, j int) bool { return s.StallsAt[i] < s.StallsAt[j] })
	return s
}

// flowsCap is the largest cap of a host's active flows, segments: the
// cwnd caps of uploads, or the downlink caps (receive window, bytes / MSS)
// of downloads.
func flowsCap(st *coop.Status, down bool) uint32 {
	var c uint32
	for _, f := range st.Flows {
		switch {
		case !down && f.Active:
			c = max(c, f.Cap)
		case down && f.DownActive && f.DownCap > 0:
			c = max(c, f.DownCap/max(f.MSS, 536))
		}
	}
	return c
}

// flowsCapChanges adds up the cap changes of a host's active flows (as
// flowsCap chooses them).
func flowsCapChanges(st *coop.Status, down bool) uint64 {
	var n uint64
	for _, f := range st.Flows {
		switch {
		case !down && f.Active:
			n += f.CapChanges
		case down && f.DownActive:
			n += f.DownCapChanges
		}
	}
	return n
}

func isServerFlow(dst string, server netip.Addr) bool {
	ap, err := netip.ParseAddrPort(dst)
	return err == nil && ap.Addr().Unmap() == server
}
