// events.go: what changes in the daemon, as events: registrations made and
// removed, components' states, the daemon restarting or going away. The
// daemon has no stream of its own; Events asks it every interval and
// reports the differences.
package client

import (
	"context"
	"maps"
	"slices"
	"time"
)

// Event kinds.
const (
	EventRegistered   = "registered"   // a flow registration appeared (Flow)
	EventUnregistered = "unregistered" // a flow registration went (Flow)
	EventComponent    = "component"    // a component's state line changed (Name, Text)
	EventDaemon       = "daemon"       // the daemon (re)started or changed policy (Text)
	EventUnreachable  = "unreachable"  // the daemon stopped answering (Err)
)

// Event is one change Events saw.
type Event struct {
	Time time.Time
	Kind string
	Flow FlowInfo // registered, unregistered
	Name string   // component: its name
	Text string   // component: its state line; daemon: version, policy and start
	Err  error    // unreachable: why
}

// Events asks the daemon every interval (at least 100 ms) what its state
// is and sends each change on the channel it returns, which it closes when
// ctx ends. The first answer is reported as a daemon event and one
// registered event per registration. A slow reader delays the polling; no
// event is dropped.
func (c *Client) Events(ctx context.Context, interval time.Duration) <-chan Event {
	ch := make(chan Event)
	go func() {
		defer close(ch)
		var w watch
		tick := time.NewTicker(max(interval, 100*time.Millisecond))
		defer tick.Stop()
		for {
			for _, ev := range w.next(c) {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// watch is what the last answer said.
type watch struct {
	down       bool // the last ask failed
	daemon     string
	flows      map[Flow]FlowInfo
	components map[string]string
}

// next asks the daemon once and returns what changed since the last time.
func (w *watch) next(c *Client) []Event {
	now := time.Now()
	st, err := c.Status()
	if err != nil {
		if w.down {
			return nil
		}
		*w = watch{down: true} // a daemon that comes back starts afresh
		return []Event{{Time: now, Kind: EventUnreachable, Err: err}}
	}
	w.down = false
	var evs []Event
	if d := st.Version + ", policy " + st.Policy + ", started " + st.StartedAt; d != w.daemon {
		evs = append(evs, Event{Time: now, Kind: EventDaemon, Text: d})
		w.daemon = d
	}
	evs = append(evs, w.flowChanges(now, st.Flows)...)
	return append(evs, w.componentChanges(now, st.Components)...)
}

func (w *watch) flowChanges(now time.Time, flows []FlowInfo) []Event {
	cur := make(map[Flow]FlowInfo, len(flows))
	for _, f := range flows {
		cur[f.Flow] = f
	}
	var evs []Event
	for k, f := range w.flows {
		if g, ok := cur[k]; !ok || g != f {
			evs = append(evs, Event{Time: now, Kind: EventUnregistered, Flow: f})
		}
	}
	for _, f := range flows {
		if g, ok := w.flows[f.Flow]; !ok || g != f {
			evs = append(evs, Event{Time: now, Kind: EventRegistered, Flow: f})
		}
	}
	w.flows = cur
	return evs
}

func (w *watch) componentChanges(now time.Time, comps map[string]string) []Event {
	var evs []Event
	for _, name := range slices.Sorted(maps.Keys(comps)) {
		if w.components[name] != comps[name] {
			evs = append(evs, Event{Time: now, Kind: EventComponent, Name: name, Text: comps[name]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.components)) {
		if _, ok := comps[name]; !ok {
			evs = append(evs, Event{Time: now, Kind: EventComponent, Name: name, Text: "gone"})
		}
	}
	w.components = comps
	return evs
}
