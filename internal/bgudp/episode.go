// episode.go: one interface's controlled period, from the classifier's
// event to episodeQuiet without the class's traffic.
package bgudp

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/yield"
)

// Episode is one interface's controlled period, as status shows it.
type Episode struct {
	Ifindex    int
	Peer       netip.Addr
	Started    time.Time
	Ended      time.Time `json:",omitzero"`
	Err        string    `json:",omitempty"`
	Controlled string    // the direction the rate applies to ("" before the first step)
	Rate       uint64    // bytes/s, 0: not policed
	Measured   uint64    // the class's rate over the last step, bytes/s
	Held       bool      // the yield holds the class now
	Sharing    bool      // a foreground is present: the class keeps a share of the target
	Base       time.Duration
	Queue      time.Duration
	Probes     uint64 // echo requests sent
	Lost       uint64
	ProbeBytes uint64 // requests and replies, IP bytes
}

// episode is one interface's controller while its class has traffic.
type episode struct {
	mu    sync.Mutex
	state State
	Episode
}

// run probes and steps until the class is quiet or ctx ends; it releases
// the rate it set.
func (e *episode) run(ctx context.Context, dp Datapath, log *slog.Logger) (err error) {
	p, err := newProber(e.Peer)
	if err != nil {
		return err
	}
	defer p.close()
	var dir datapath.Direction
	defer func() {
		_ = dp.SetBgRate(e.Ifindex, datapath.Upload, 0)
		_ = dp.SetBgRate(e.Ifindex, datapath.Download, 0)
	}()
	prev, at, err := e.read(dp)
	if err != nil {
		return err
	}
	active, target := at, e.state.Rule.Target
	for {
		tick := time.Now()
		rtt, err := p.rtt()
		if err != nil {
			return err
		}
		cur, now, err := e.read(dp)
		if err != nil {
			return err
		}
		dt := now.Sub(at).Seconds()
		up, down := cur[0].Bytes-prev[0].Bytes, cur[1].Bytes-prev[1].Bytes
		if cur[0].Packets != prev[0].Packets || cur[1].Packets != prev[1].Packets {
			active = now
		} else if now.Sub(active) > episodeQuiet {
			return nil
		}
		d := datapath.Upload
		if down > up {
			d = datapath.Download
		}
		bytes := max(up, down)
		held, present := dp.BgClassHeld(e.Ifindex), dp.ForegroundPresent(e.Ifindex)
		if d == datapath.Download && present { // arrivals: held beside a present foreground too (bgclass.h)
			held = true
		}
		e.mu.Lock()
		// uploads beside a present foreground: a share of the target (as LEDBAT++)
		e.state.Rule.Target, e.Sharing = target, present && d == datapath.Upload
		if e.Sharing {
			e.state.Rule.Target = yield.ShareTarget(target)
		}
		if d != dir && e.state.Rate != 0 { // the other direction took over: start it unpoliced
			_ = dp.SetBgRate(e.Ifindex, dir, 0)
			e.state.Rate = 0
		}
		dir = d
		rate := e.state.Step(rtt, uint64(float64(bytes)/max(dt, 1e-3)), held)
		e.Controlled, e.Rate, e.Measured, e.Held = d.String(), rate, uint64(float64(bytes)/max(dt, 1e-3)), held
		e.Base, e.Queue, e.Probes, e.Lost, e.ProbeBytes = e.state.Base, e.state.Queue, p.Sent, e.state.Lost, p.Bytes
		e.mu.Unlock()
		log.Debug("bgudp: step", "dir", d, "rtt", rtt, "queue", e.state.Queue, "measured", e.Measured, "rate", rate, "held", held)
		if err := dp.SetBgRate(e.Ifindex, d, rate); err != nil {
			return err
		}
		prev, at = cur, now
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(tick.Add(e.state.Rule.Interval))):
		}
	}
}

// read takes both directions' counters and the time.
func (e *episode) read(dp Datapath) ([2]datapath.BgClass, time.Time, error) {
	var out [2]datapath.BgClass
	for i, d := range []datapath.Direction{datapath.Upload, datapath.Download} {
		c, err := dp.BgClass(e.Ifindex, d)
		if err != nil {
			return out, time.Time{}, err
		}
		out[i] = c
	}
	return out, time.Now(), nil
}

// snapshotLocked copies the episode's figures (e.mu held).
func (e *episode) snapshotLocked() Episode { return e.Episode }
