// events.go: what changes in the daemon, as events: registrations made and
// removed, components' states, the daemon restarting or going away. The
// daemon streams them on a connection of their own (the events op: a
// change through the API arrives at once, others within 250 ms); a daemon
// without the stream is asked for its status every interval instead, and
// the differences reported.
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/api"
)

// Event kinds.
const (
	EventRegistered   = api.EventRegistered   // a flow registration appeared (Flow)
	EventUnregistered = api.EventUnregistered // a flow registration went (Flow)
	EventComponent    = api.EventComponent    // a component's state line changed (Name, Text)
	EventDaemon       = api.EventDaemon       // the daemon (re)started or changed policy (Text)
	EventUnreachable  = "unreachable"         // the daemon stopped answering (Err)
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

// Events sends each change in the daemon on the channel it returns, which
// it closes when ctx ends: first the state now (a daemon event, one
// registered event per registration, one component event per component),
// then the changes as the daemon streams them. When the daemon cannot be
// reached, or its stream ends, an unreachable event is sent and it is
// dialed again every interval (at least 100 ms); a daemon that predates the
// stream is asked for its status every interval instead. A slow reader
// holds up only its own stream; the daemon drops a stream 256 events
// behind, which is then reopened with the state afresh.
func (c *Client) Events(ctx context.Context, interval time.Duration) <-chan Event {
	ch := make(chan Event)
	interval = max(interval, 100*time.Millisecond)
	go func() {
		defer close(ch)
		send := func(ev Event) bool {
			select {
			case ch <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		down := false
		for ctx.Err() == nil {
			err := c.stream(ctx, send)
			if errors.Is(err, errNoStream) {
				c.poll(ctx, interval, send)
				return
			}
			if ctx.Err() != nil {
				return
			}
			if !down && !send(Event{Time: time.Now(), Kind: EventUnreachable, Err: err}) {
				return
			}
			down = true
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// errNoStream: the daemon does not know the events op.
var errNoStream = errors.New("the daemon has no events stream")

// stream reads one events stream until it fails or ctx ends, handing each
// event to send.
func (c *Client) stream(ctx context.Context, send func(Event) bool) error {
	conn, err := c.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := conn.Write([]byte(`{"op":"events"}` + "\n")); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	first := true
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("events stream: %w", err)
		}
		var resp api.Response
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("events stream: %w", err)
		}
		if !resp.OK {
			if first && strings.Contains(resp.Error, "unknown op") {
				return errNoStream
			}
			return &DaemonError{Msg: resp.Error}
		}
		first = false
		if e := resp.Event; e != nil {
			ev := Event{Time: e.Time, Kind: e.Kind, Name: e.Name, Text: e.Text}
			if e.Flow != nil {
				ev.Flow = *e.Flow
			}
			if !send(ev) {
				return ctx.Err()
			}
		}
	}
}

// poll asks the daemon every interval and sends what changed (a daemon
// without the events stream).
func (c *Client) poll(ctx context.Context, interval time.Duration, send func(Event) bool) {
	var w watch
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		for _, ev := range w.next(c) {
			if !send(ev) {
				return
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
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
