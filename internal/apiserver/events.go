// events.go: the events stream (api.OpEvents). A connection that asks for
// it gets, after its reply, the daemon's state as events (the daemon, each
// registration, each component) and then each change as it happens: a
// change made through the API (register, unregister) at once,
// one made otherwise (a registration dying with its socket, a component's
// state, a reload) at the next of the hub's status reads, every 250 ms
// while anyone listens and never else. One hub serves every stream: the
// status is read once for all of them. A reader that falls 256 events
// behind loses its stream (the connection closes; it reconnects and gets
// the state afresh) rather than holding the daemon up.
package apiserver

import (
	"bufio"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/api"
)

// eventsEvery is how often the hub reads the daemon's status while
// streams are open.
const eventsEvery = 250 * time.Millisecond

// streamBacklog is how many events a stream may have unwritten.
const streamBacklog = 256

// hub diffs the daemon's status for the open streams.
type hub struct {
	status func() (*api.Status, error) // the daemon's (Handler.Status)
	closed chan struct{}               // closed when the server closes

	mu      sync.Mutex
	subs    map[chan api.Event]struct{}
	daemon  string
	flows   map[api.Flow]api.FlowInfo
	comps   map[string]string
	kick    chan struct{} // a change through the API: read the status now
	running bool
}

// daemonText is what a daemon event says.
func daemonText(st *api.Status) string {
	return st.Version + ", policy " + st.Policy + ", started " + st.StartedAt
}

// subscribe opens a stream: its first events are the state now.
func (h *hub) subscribe() chan api.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs, h.kick = map[chan api.Event]struct{}{}, make(chan struct{}, 1)
	}
	h.readLocked() // the others learn what changed; the state is now's
	ch := make(chan api.Event, streamBacklog+len(h.flows)+len(h.comps)+1)
	now := time.Now()
	ch <- api.Event{Time: now, Kind: api.EventDaemon, Text: h.daemon}
	for _, f := range h.flows {
		ch <- api.Event{Time: now, Kind: api.EventRegistered, Flow: &f}
	}
	for _, name := range slices.Sorted(maps.Keys(h.comps)) {
		ch <- api.Event{Time: now, Kind: api.EventComponent, Name: name, Text: h.comps[name]}
	}
	h.subs[ch] = struct{}{}
	if !h.running {
		h.running = true
		go h.watch()
	}
	return ch
}

// unsubscribe closes a stream (if the hub has not already).
func (h *hub) unsubscribe(ch chan api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

// changed is called after a change through the API succeeded: the hub
// reads the status now.
func (h *hub) changed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kick != nil {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// watch reads the status every eventsEvery, or at once when kicked, while
// any stream is open.
func (h *hub) watch() {
	tick := time.NewTicker(eventsEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-h.kick:
		case <-h.closed:
		}
		h.mu.Lock()
		if len(h.subs) == 0 || isClosed(h.closed) {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.readLocked()
		h.mu.Unlock()
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readLocked reads the status and publishes what changed since the last
// read (h.mu held).
func (h *hub) readLocked() {
	st, err := h.status()
	if err != nil {
		return
	}
	now := time.Now()
	var evs []api.Event
	if d := daemonText(st); d != h.daemon {
		evs = append(evs, api.Event{Time: now, Kind: api.EventDaemon, Text: d})
		h.daemon = d
	}
	cur := make(map[api.Flow]api.FlowInfo, len(st.Flows))
	for _, f := range st.Flows {
		cur[f.Flow] = f
	}
	for k, f := range h.flows {
		if g, ok := cur[k]; !ok || g != f {
			evs = append(evs, api.Event{Time: now, Kind: api.EventUnregistered, Flow: &f})
		}
	}
	for _, f := range st.Flows {
		if g, ok := h.flows[f.Flow]; !ok || g != f {
			evs = append(evs, api.Event{Time: now, Kind: api.EventRegistered, Flow: &f})
		}
	}
	h.flows = cur
	for _, name := range slices.Sorted(maps.Keys(st.Components)) {
		if h.comps[name] != st.Components[name] {
			evs = append(evs, api.Event{Time: now, Kind: api.EventComponent, Name: name, Text: st.Components[name]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(h.comps)) {
		if _, ok := st.Components[name]; !ok {
			evs = append(evs, api.Event{Time: now, Kind: api.EventComponent, Name: name, Text: "gone"})
		}
	}
	h.comps = st.Components
	h.publishLocked(evs)
}

// publishLocked sends evs to every stream; one without room is closed.
func (h *hub) publishLocked(evs []api.Event) {
	for ch := range h.subs {
		for _, ev := range evs {
			select {
			case ch <- ev:
			default:
				delete(h.subs, ch)
				close(ch)
			}
			if _, ok := h.subs[ch]; !ok {
				break
			}
		}
	}
}

// stream writes a subscribed connection's events until it closes, its
// stream is dropped or the server closes.
func (s *Server) stream(c *net.UnixConn, sc *bufio.Scanner, w *bufio.Writer) {
	ch := s.events.subscribe()
	defer s.events.unsubscribe(ch)
	gone := make(chan struct{})
	go func() { // the client sends nothing more: a read ends at its close
		for sc.Scan() {
		}
		close(gone)
	}()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if err := writeResponse(w, &api.Response{OK: true, Event: &ev}); err != nil {
				return
			}
		case <-gone:
			return
		case <-s.closed:
			c.Close() // ends the reader
			return
		}
	}
}
