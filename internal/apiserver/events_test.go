// events_test.go: the events stream: the state and a change through the API
// pushed whatever the client's interval, a gone client's stream closed, a
// stream that does not read dropped at its backlog.
package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// flowsHandler is the test handler whose status lists its registrations.
type flowsHandler struct{ *handler }

func (h flowsHandler) Status() (*api.Status, error) {
	flows, _ := h.Flows()
	return &api.Status{Version: "test", Flows: flows}, nil
}

// nextEvent is the next event of ch, or fails after 10 s.
func nextEvent(t *testing.T, ch <-chan client.Event) client.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return client.Event{}
	}
}

// TestEventsStreamed: Events asked the daemon for its status every
// interval and diffed; a client asking every hour saw no change for an
// hour. The daemon now streams: the state at once, a registration made
// through the API as it is made, whatever the client's interval; a
// stream whose client went away is closed on the daemon's side.
func TestEventsStreamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lanes.sock")
	f := api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	h := flowsHandler{&handler{o: owners{flows: map[api.Flow][]uint32{f: {uint32(os.Getuid())}}}}}
	s := serve(t, path, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := client.New(path).Events(ctx, time.Hour)
	if ev := nextEvent(t, events); ev.Kind != client.EventDaemon || ev.Text != "test, policy , started " {
		t.Fatalf("first event %+v, want the daemon's", ev)
	}
	c, err := client.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Register(f, lane.Background); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events); ev.Kind != client.EventRegistered || ev.Flow.Flow.SPort != f.SPort || ev.Flow.Lane != lane.Background {
		t.Fatalf("event %+v, want the registration of %s in background", ev, f)
	}
	cancel()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s.events.mu.Lock()
		n := len(s.events.subs)
		s.events.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open on the daemon's side after the client went", n)
		}
	}
}

// TestEventsSlowReaderDropped: a stream that does not read is closed once
// streamBacklog events wait, so it never holds the daemon up; the others
// keep theirs.
func TestEventsSlowReaderDropped(t *testing.T) {
	h := &hub{status: flowsHandler{&handler{}}.Status, closed: make(chan struct{})}
	defer close(h.closed)
	slow, live := h.subscribe(), h.subscribe()
	for i := range streamBacklog + 10 {
		h.mu.Lock()
		h.publishLocked([]api.Event{{Kind: api.EventComponent, Name: "x", Text: strconv.Itoa(i)}})
		h.mu.Unlock()
		<-live // this one reads (its state event first, then one per publish)
	}
	h.mu.Lock()
	_, open := h.subs[slow]
	_, kept := h.subs[live]
	left := len(h.subs)
	h.mu.Unlock()
	if open {
		t.Fatalf("a stream %d events behind is still open", streamBacklog+10)
	}
	n := 0
	for range slow { // closed: what it had buffered, then the end
		n++
	}
	if n > streamBacklog+2 || !kept || left != 1 {
		t.Errorf("slow stream: %d events before it closed (backlog %d), live stream kept %v, %d streams left", n, streamBacklog, kept, left)
	}
}
