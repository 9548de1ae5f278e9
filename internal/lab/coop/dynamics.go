// dynamics.go: experiment coop-dynamics: senders join and leave on a
// schedule (5 -> 8 -> 5, one every period) while a poller reads every
// host's caps and cwnds; per phase the goodput and Jain's index, per event
// how long the caps took to follow and the group's N to change.
package coop

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// dynamicsOptions are the coop-dynamics experiment's flags.
type dynamicsOptions struct {
	c         coopCommon
	scale     float64
	baseline  bool
	direction string
}

// runDynamicsExperiment runs the 5 -> 8 -> 5 schedule with lanes (and plain
// TCP) in each direction asked for, and tabulates its phases and the
// reactions to joins and leaves.
func runDynamicsExperiment(ctx context.Context, env *testbed.Env, o *dynamicsOptions) (*testbed.Result, error) {
	c := &o.c
	if env.Quick && o.scale == 1 {
		o.scale = 0.25
	}
	dirs, err := parseDirections(o.direction)
	if err != nil {
		return nil, err
	}
	period := time.Duration(float64(60*time.Second) * o.scale)
	r := &testbed.Result{Experiment: "coop-dynamics", Started: time.Now(), Params: c.params()}
	r.Params["period"], r.Params["schedule"] = period.String(), "5 hosts from 0; join at 1,2,3 periods; leave at 4,5,6; end at 7"
	r.Params["direction"] = o.direction
	modes := []string{"lanes"}
	if o.baseline {
		modes = append(modes, "tcp")
	}
	phases := testbed.Table{Title: "coop-dynamics: per phase (N expected, N the daemons reported, median cap, total goodput, Jain)",
		Columns: []string{"dir", "mode", "phase", "N", "N seen", "cap", "total Mbit/s", "Jain 200ms", "Jain 200ms air", "RTT p50 ms"}}
	react := testbed.Table{Title: "reaction: time from a host starting/stopping its transfer until every daemon reports the new N, and (joins) until every lanes flow is at or below its new cap (up: cwnd; down: the window the server sees)",
		Columns: []string{"dir", "event", "at s", "new N", "N: slowest daemon ms", "N: fastest ms", "<= cap ms", "<= cap after the new N ms (slowest host)"}}
	data := map[string]any{}
	var stopNotes []string
	for _, dir := range dirs {
		c.down = dir == "down"
		for _, mode := range modes {
			env.Printf("coop-dynamics %s %s: period %v, 7 periods...\n", dir, mode, period)
			d, err := runDynamics(ctx, env, c, mode == "lanes", period)
			if err != nil {
				return nil, err
			}
			data[dir+" "+mode] = d
			phases.Rows = append(phases.Rows, dynamicsPhaseRows(d, dir, mode, period)...)
			if mode == "lanes" {
				stopNotes = append(stopNotes, fmt.Sprintf("%s: daemons that stopped capping during the run (the safety fallback): %s", dir, stopsText(cappingStops(d.Series, allHosts(8)))))
				react.Rows = append(react.Rows, reactionRows(d, dir)...)
			}
		}
	}
	r.Tables = []testbed.Table{phases, react}
	r.Notes = []string{"the paper refreshed N every 10 s; here a peer's change of activity or goodbye triggers recomputation at once, silence is noticed after 3 intervals (1.5 s)",
		"Jain is over the hosts uploading in each interval; phases leave out their first 5 s (or a third of a short period)"}
	r.Notes = append(r.Notes, stopNotes...)
	r.Data = data
	r.Environment = testbed.CaptureEnvironment(nil, env, nil)
	r.Duration = time.Since(r.Started)
	return r, nil
}

// dynamicsPhaseRows are one run's rows of the phase table: each of the 7
// periods without its first 5 s (or a third of a short period).
func dynamicsPhaseRows(d *dynResult, dir, mode string, period time.Duration) [][]string {
	var rows [][]string
	for p := 0; p < 7; p++ {
		nExp := []int{5, 6, 7, 8, 7, 6, 5}[p]
		from, to := (float64(p)*period.Seconds())+min(5, period.Seconds()/3), float64(p+1)*period.Seconds()
		st := d.Series.stats(allHosts(8), from, to)
		seen, capv := "-", "-"
		if mode == "lanes" {
			seen, capv = d.nSeen(from, to)
		}
		rows = append(rows, []string{dir, mode, fmt.Sprintf("%.0f-%.0f s", from, to), strconv.Itoa(nExp), seen, capv,
			mbit(st.TotalMbit), fmt.Sprintf("%.3f", activeJain(d.Series, from, to, appBytes)),
			fmt.Sprintf("%.3f", activeJain(d.Series, from, to, airBytes)), fmt.Sprintf("%.0f", st.RTTms)})
	}
	return rows
}

// reactionRows are one lanes run's rows of the reaction table: each join
// and leave, how long the daemons took to see the new N and (joins) the
// flows to be within their new caps.
func reactionRows(d *dynResult, dir string) [][]string {
	var rows [][]string
	for _, e := range d.Events {
		rs, fs, cs, ca := "never", "-", "-", "-"
		if e.Slowest >= 0 {
			rs = fmt.Sprintf("%.0f", e.Slowest)
			fs = fmt.Sprintf("%.0f", e.Fastest)
		}
		if e.Kind == "join" {
			cs, ca = "never", "never"
			if e.CapMs >= 0 {
				cs = fmt.Sprintf("%.0f", e.CapMs)
			}
			if e.CapAfterNMs >= 0 {
				ca = fmt.Sprintf("%.0f", e.CapAfterNMs)
			}
		}
		rows = append(rows, []string{dir, e.Kind, fmt.Sprintf("%.1f", e.At), strconv.Itoa(e.NewN), rs, fs, cs, ca})
	}
	return rows
}

// dynEvent is one join or leave and how fast the daemons followed.
type dynEvent struct {
	Kind    string  `json:"kind"`
	At      float64 `json:"at_s"`
	NewN    int     `json:"new_n"`
	Slowest float64 `json:"reaction_ms"` // -1: not within the period
	Fastest float64 `json:"fastest_ms"`
	// Joins: until every lanes flow's cwnd is at or below its new cap, from
	// the join (CapMs) and, slowest host, from the moment that host's
	// daemon reported the new N (CapAfterNMs); -1: not within the period.
	CapMs       float64 `json:"cwnd_under_cap_ms,omitempty"`
	CapAfterNMs float64 `json:"cwnd_under_cap_after_n_ms,omitempty"`
}

// Per-host states of the cwnd-under-cap samples.
const (
	capNoFlow int8 = -1 // no upload in flight
	capAbove  int8 = 0  // some flow's cwnd above its cap (or no cap yet)
	capUnder  int8 = 1  // every flow's cwnd at or below its cap
)

type dynResult struct {
	Series *coopSeries `json:"series"`
	Events []dynEvent  `json:"events"`
	// Every 50 ms, per host: N its daemon reported, its largest cap, and
	// whether its uploads' cwnds (TCP monitor) were at or below their caps.
	NT       []float64 `json:"n_t_s"`
	NSeen    [][]int   `json:"n_seen"`
	Caps     [][]int   `json:"caps"`
	UnderCap [][]int8  `json:"cwnd_under_cap"`

	evMu sync.Mutex // Events, while the schedule runs
}

// nSeen summarises the daemons' N and caps over a phase: the median.
func (d *dynResult) nSeen(from, to float64) (string, string) {
	var ns, cs []int
	for i, t := range d.NT {
		if t <= from || t > to {
			continue
		}
		ns = append(ns, d.NSeen[i]...)
		for _, c := range d.Caps[i] {
			if c > 0 {
				cs = append(cs, c)
			}
		}
	}
	med := func(v []int) string {
		if len(v) == 0 {
			return "-"
		}
		sort.Ints(v)
		return strconv.Itoa(v[len(v)/2])
	}
	return med(ns), med(cs)
}

// capState compares a host's uploads' cwnds with the caps its daemon
// reports: a flow the daemon has not listed yet is held to the cap its
// daemon gives new connections of its lane (what sock_ops applied).
func capState(st *coop.Status, flows []tcpmon.Flow, server netip.Addr) int8 {
	caps := map[uint64]uint32{}
	for _, f := range st.Flows {
		caps[f.Cookie] = f.Cap
	}
	state := capNoFlow
	for _, f := range flows {
		if !isServerFlow(f.Dst, server) || f.State != "ESTAB" || f.Unacked == 0 {
			continue
		}
		c, ok := caps[f.Cookie]
		if !ok {
			c = st.LaneCaps[lane.Interactive.String()]
		}
		if c == 0 || f.Cwnd > c {
			return capAbove
		}
		state = capUnder
	}
	return state
}

// downCapState compares the window the server sees a host's download
// offer with the downlink cap its daemon reports (one download per host;
// whole units of the window scale, up to 2^12 bytes, over the cap allowed).
func downCapState(st *coop.Status, v *senderView) int8 {
	if v == nil || v.k == 0 {
		return capNoFlow
	}
	var c uint32
	for _, f := range st.Flows {
		if f.DownActive {
			c = max(c, f.DownCap)
		}
	}
	if c == 0 || v.sndWnd > c+1<<12 {
		return capAbove
	}
	return capUnder
}

// runDynamics runs the 5 -> 8 -> 5 schedule on 8 hosts.
func runDynamics(ctx context.Context, env *testbed.Env, c *coopCommon, lanesOn bool, period time.Duration) (*dynResult, error) {
	bc, err := c.bed(8, func(int) bool { return lanesOn })
	if err != nil {
		return nil, err
	}
	cb, err := newCoopBed(ctx, env, bc)
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ups := make([]*upload, 8)
	first, err := cb.startFlows(rctx, allHosts(5))
	if err != nil {
		return nil, err
	}
	copy(ups, first)
	d := &dynResult{}
	start := time.Now()
	// the schedule and the daemons' poller run beside the recorder
	errc := make(chan error, 1)
	go func() { errc <- d.runSchedule(rctx, env, cb, ups, start, period) }()
	pollDone := make(chan error, 1)
	if lanesOn {
		p, err := newDynPoller(cb, bc.Down)
		if err != nil {
			return nil, err
		}
		go func() { pollDone <- p.run(rctx, d, start) }()
	} else {
		pollDone <- nil
	}
	d.Series, err = cb.record(ctx, 200*time.Millisecond, 7*period, nil)
	cancel()
	if perr := <-pollDone; err == nil {
		err = perr
	}
	if serr := <-errc; err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	for k := range d.Events {
		d.reaction(&d.Events[k], period.Seconds())
	}
	return d, ctx.Err()
}

// runSchedule joins hosts 6, 7 and 8 one period apart from the first
// period on, then has them leave one period apart, recording each event
// (ups holds every host's transfer). It returns at the end of the schedule
// or of ctx.
func (d *dynResult) runSchedule(ctx context.Context, env *testbed.Env, cb *coopBed, ups []*upload, start time.Time, period time.Duration) error {
	type step struct {
		at   time.Duration
		host int
		join bool
	}
	plan := []step{{period, 5, true}, {2 * period, 6, true}, {3 * period, 7, true},
		{4 * period, 7, false}, {5 * period, 6, false}, {6 * period, 5, false}}
	n := 5
	for _, p := range plan {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(p.at))):
		}
		at := time.Since(start)
		kind := "join"
		if p.join {
			u, err := cb.startFlow(ctx, p.host)
			if err != nil {
				return err
			}
			ups[p.host] = u
			n++
			env.Printf("  %5.1f s: host %d joins (N=%d)\n", at.Seconds(), p.host+1, n)
		} else {
			kind = "leave"
			ups[p.host].stop()
			n--
			env.Printf("  %5.1f s: host %d leaves (N=%d)\n", at.Seconds(), p.host+1, n)
		}
		d.evMu.Lock()
		d.Events = append(d.Events, dynEvent{Kind: kind, At: at.Seconds(), NewN: n, Slowest: -1, Fastest: -1, CapMs: -1, CapAfterNMs: -1})
		d.evMu.Unlock()
	}
	return nil
}

// dynPoller samples every daemon's N and caps every 50 ms, and whether
// each host's flows are within their caps: its uploads' cwnd from its own
// monitor, or (downloads) the window the server's sockets see.
type dynPoller struct {
	cb     *coopBed
	down   bool
	mons   []*tcpmon.Sampler // one per host; a sampler serves one goroutine
	srvMon *tcpmon.Sampler   // downloads: the senders are the server's
}

// newDynPoller opens the poller's monitors.
func newDynPoller(cb *coopBed, down bool) (*dynPoller, error) {
	p := &dynPoller{cb: cb, down: down}
	for _, h := range cb.hosts {
		m, err := tcpmon.New(tcpmon.Config{NetNS: h.node.Handle, NoProcess: true, Interval: 50 * time.Millisecond})
		if err != nil {
			p.close()
			return nil, fmt.Errorf("monitor in %s: %w", h.node.Name, err)
		}
		p.mons = append(p.mons, m)
	}
	if down {
		m, err := tcpmon.New(tcpmon.Config{NetNS: cb.server.Handle, NoProcess: true, Interval: 50 * time.Millisecond})
		if err != nil {
			p.close()
			return nil, fmt.Errorf("monitor in the server: %w", err)
		}
		p.srvMon = m
	}
	return p, nil
}

func (p *dynPoller) close() {
	for _, m := range p.mons {
		m.Close()
	}
	if p.srvMon != nil {
		p.srvMon.Close()
	}
}

// run polls until ctx ends, appending to d's samples, then closes the
// monitors.
func (p *dynPoller) run(ctx context.Context, d *dynResult, start time.Time) error {
	defer p.close()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		el := time.Since(start).Seconds()
		row, caps, under, err := p.poll()
		if err != nil {
			return err
		}
		d.NT = append(d.NT, el)
		d.NSeen = append(d.NSeen, row)
		d.Caps = append(d.Caps, caps)
		d.UnderCap = append(d.UnderCap, under)
	}
}

// poll is one sample: each daemon's N and flow cap, and whether its flows
// are within their caps.
func (p *dynPoller) poll() (row, caps []int, under []int8, err error) {
	row, caps, under = make([]int, 8), make([]int, 8), make([]int8, 8)
	var srv map[*coopHost]*senderView
	if p.srvMon != nil {
		fl, err := p.srvMon.Sample()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("monitor in the server: %w", err)
		}
		srv = p.cb.serverSide(fl)
	}
	for i, h := range p.cb.hosts {
		st, err := h.coopStatus()
		if err != nil {
			return nil, nil, nil, err
		}
		row[i] = st.N
		if p.down {
			row[i] = st.Down.N
		}
		caps[i] = int(flowsCap(st, p.down))
		if p.down {
			under[i] = downCapState(st, srv[h])
			continue
		}
		fl, err := p.mons[i].Sample()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("monitor in %s: %w", h.node.Name, err)
		}
		under[i] = capState(st, fl, p.cb.server.Addr)
	}
	return row, caps, under, nil
}

// reaction fills an event's reaction times from the 50 ms samples.
func (d *dynResult) reaction(e *dynEvent, period float64) {
	if len(d.NT) == 0 {
		return
	}
	hosts := len(d.NSeen[0])
	firstN := make([]float64, hosts) // s since the event, -1: not seen
	for i := range firstN {
		firstN[i] = -1
	}
	capAt := -1.0
	for j, t := range d.NT {
		if t < e.At || t > e.At+period {
			continue
		}
		all := true
		for i, n := range d.NSeen[j] {
			if n == e.NewN {
				if firstN[i] < 0 {
					firstN[i] = t - e.At
				}
			} else {
				all = false
			}
		}
		if e.Kind != "join" || capAt >= 0 || !all {
			continue
		}
		under := true
		for _, u := range d.UnderCap[j] {
			under = under && u != capAbove
		}
		if under {
			capAt = t - e.At
		}
	}
	slow, fast := 0.0, math.Inf(1)
	for _, f := range firstN {
		if f < 0 {
			return
		}
		slow, fast = max(slow, f), min(fast, f)
	}
	e.Slowest, e.Fastest = slow*1000, fast*1000
	if e.Kind != "join" || capAt < 0 {
		return
	}
	e.CapMs = capAt * 1000
	// per host: from its daemon's new N until its flows are under their caps
	after := 0.0
	for i := 0; i < hosts; i++ {
		from, found := e.At+firstN[i], false
		for j, t := range d.NT {
			if t >= from && t <= e.At+period && d.UnderCap[j][i] != capAbove {
				after, found = max(after, t-from), true
				break
			}
		}
		if !found {
			return
		}
	}
	e.CapAfterNMs = after * 1000
}
