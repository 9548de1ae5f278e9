// monitor_lanes.go: what `lanes monitor` asks the daemon about the flows it
// samples: each socket's lane and why, the congestion control the app
// asked for, the coop controller's caps and whether background is held.
package main

import (
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// daemonLanes asks the daemon for the lanes of sampled sockets, in one
// batch per sample for the cookies it has not answered yet. Sockets the
// daemon does not know are in the default lane (interactive) and are asked
// about again after a while, in case they were registered since; so are
// background sockets, whose app may set a congestion control of its own at
// any time (shown beside the LEDBAT++ it keeps).
type daemonLanes struct {
	client  *client.Client
	err     error
	known   map[uint64]laneAnswer
	ccNames map[string]string // lanes' congestion controls: kernel name -> "ledbat", "capcc"
	warned  bool
	// The daemon's status says the background lane holds a backlog
	// (queued), asked at queuedAt.
	queued   bool
	queuedAt time.Time
}

type laneAnswer struct {
	l     lane.Lane
	why   string // what decided it, from the daemon
	appCC string // the congestion control the app asked for and did not get
	asked time.Time
	found bool
}

// reaskAfter is how long an answer about a socket the daemon did not know,
// or a background socket, stands before it is asked for again.
const reaskAfter = 2 * time.Second

// stale says whether a's answer is to be asked for again.
func (a laneAnswer) stale(now time.Time) bool {
	return (!a.found || a.l == lane.Background) && now.Sub(a.asked) > reaskAfter
}

// coopCaps reads the cooperative controller's caps in force, by cookie:
// {cwnd cap (segments), downlink cap (bytes)}; none when the daemon runs
// no controller.
func (d *daemonLanes) coopCaps() map[uint64][2]uint32 {
	doc, err := d.client.Component("coop")
	if err != nil {
		return nil
	}
	var st struct {
		Flows []struct {
			Cookie  uint64 `json:"cookie"`
			Cap     uint32 `json:"cap"`
			DownCap uint32 `json:"down_cap_bytes"`
		} `json:"flows"`
	}
	if json.Unmarshal(doc, &st) != nil {
		return nil
	}
	m := make(map[uint64][2]uint32, len(st.Flows))
	for _, f := range st.Flows {
		m[f.Cookie] = [2]uint32{f.Cap, f.DownCap}
	}
	return m
}

// yielding says whether the daemon's yield holds background now (its
// background component); false without one.
func (d *daemonLanes) yielding() bool {
	doc, err := d.client.Component("background")
	if err != nil {
		return false
	}
	var st struct {
		Yielding bool `json:"yielding"`
	}
	return json.Unmarshal(doc, &st) == nil && st.Yielding
}

func newDaemonLanes(socket string) *daemonLanes {
	c, err := client.Dial(socket)
	return &daemonLanes{client: c, err: err, known: map[uint64]laneAnswer{}}
}

func (d *daemonLanes) close() {
	if d.client != nil {
		d.client.Close()
	}
}

// apply sets each flow's lane and keeps those in want (all if want is empty).
func (d *daemonLanes) apply(flows []tcpmon.Flow, want []lane.Lane) []tcpmon.Flow {
	if d.client == nil {
		return flows
	}
	d.ask(flows, time.Now())
	if len(d.known) > 4*len(flows)+1024 { // forget closed sockets now and then
		d.forgetClosed(flows)
	}
	caps, yielding, queued := d.coopCaps(), d.yielding(), d.backgroundQueued(time.Now())
	out := flows[:0]
	for i := range flows {
		f := &flows[i]
		if a, ok := d.known[f.Cookie]; ok {
			f.Lane, f.Why, f.AppCong = a.l, a.why, a.appCC
		}
		if n, ok := d.ccNames[f.Cong]; ok {
			f.Cong = n
		}
		if c, ok := caps[f.Cookie]; ok {
			f.CwndCap, f.RwndCap = c[0], c[1]
		}
		f.Held = yielding && f.Lane == lane.Background
		f.Queued = queued && f.Lane == lane.Background
		if len(want) == 0 || slices.Contains(want, f.Lane) {
			out = append(out, *f)
		}
	}
	return out
}

// queuedEvery: how often the daemon's status is asked whether the
// background lane holds a backlog (a status answer is larger than the
// per-sample ones).
const queuedEvery = time.Second

// backgroundQueued says whether the background lane holds a backlog in
// lanes' queue on some interface (the daemon's status, asked at most once
// every queuedEvery); false without an answer.
func (d *daemonLanes) backgroundQueued(now time.Time) bool {
	if now.Sub(d.queuedAt) < queuedEvery {
		return d.queued
	}
	d.queuedAt = now
	st, err := d.client.Status()
	d.queued = err == nil && st.BackgroundQueued()
	return d.queued
}

// ask asks the daemon, in one batch, about the flows' sockets it has not
// answered for or whose answer is stale; a failure is logged once.
func (d *daemonLanes) ask(flows []tcpmon.Flow, now time.Time) {
	var ask []uint64
	for i := range flows {
		c := flows[i].Cookie
		a, ok := d.known[c]
		if c != 0 && (!ok || a.stale(now)) {
			ask = append(ask, c)
		}
	}
	if len(ask) == 0 {
		return
	}
	si, err := d.client.SocketInfo(ask)
	if err != nil {
		if !d.warned {
			slog.Warn("lanes of sockets from the daemon", "err", err)
			d.warned = true
		}
		return
	}
	for _, c := range ask {
		l, found := si.Lanes[c]
		if !found || l == lane.Unset {
			l = lane.Interactive
		}
		d.known[c] = laneAnswer{l: l, why: si.Why[c], appCC: si.AppCC[c], asked: now, found: found}
	}
	if len(si.CCNames) > 0 {
		d.ccNames = si.CCNames
	}
}

// forgetClosed drops the answers about sockets no longer among flows.
func (d *daemonLanes) forgetClosed(flows []tcpmon.Flow) {
	live := make(map[uint64]bool, len(flows))
	for i := range flows {
		live[flows[i].Cookie] = true
	}
	for c := range d.known {
		if !live[c] {
			delete(d.known, c)
		}
	}
}
