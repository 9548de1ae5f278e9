// bgevents.go: the reader of the classifier's event ring
// (lanes_bg_events), started with the host and closed by its Close. Its
// owner is the host's background class, the smallest that always runs
// with the datapath and owns both of the ring's kinds: a held background
// download's pure ACKs (BG_EVENT_HELD_ACKS) start the held-ACK pacer
// (heldack.go) whatever components run, and the QUIC/UDP class's episode
// events go to their one subscriber, bgudp's controller (BgEvents), and
// are dropped while none is: the classifier posts again each second while
// such traffic flows.
package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/cilium/ebpf/ringbuf"
)

// bgEventSize is struct bg_event's size (bgclass.h).
const bgEventSize = 24

// bgEventBuffer is the episode events a slow subscriber may lag by.
const bgEventBuffer = 16

// bgEvents reads the ring until closed.
type bgEvents struct {
	rd    *ringbuf.Reader
	close func() error // closes rd once

	mu    sync.Mutex
	sub   chan BgEvent // the subscriber's; nil: none
	ended bool         // the reader returned: no subscriber more
}

// startBgEvents opens the ring's reader and runs it for b; where it
// cannot be opened, held ACKs are not paced and the class's controller
// cannot start (BgEvents says why).
func startBgEvents(b *BackgroundClass) {
	rd, err := ringbuf.NewReader(b.cls.LanesBgEvents)
	if err != nil {
		b.eventsErr = fmt.Errorf("the classifier's event ring: %w", err)
		slog.Warn("datapath: held downloads' ACKs not paced, background QUIC/UDP not controlled", "err", b.eventsErr)
		return
	}
	ev := &bgEvents{rd: rd, close: sync.OnceValue(rd.Close)}
	b.events = ev
	go ev.run(b.heldAcks)
}

// run reads events until the reader is closed: held ACKs to heldAcks,
// the rest to the subscriber.
func (ev *bgEvents) run(heldAcks func(ifindex int)) {
	defer ev.end()
	for {
		rec, err := ev.rd.Read()
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			slog.Warn("datapath: the classifier's events", "err", err)
			continue
		}
		if len(rec.RawSample) < bgEventSize {
			continue
		}
		e := BgEvent{Ifindex: binary.NativeEndian.Uint32(rec.RawSample[0:]),
			Dir: Direction(binary.NativeEndian.Uint32(rec.RawSample[4:])), Peer: [16]byte(rec.RawSample[8:24])}
		if e.Dir == HeldAckEvent {
			heldAcks(int(e.Ifindex))
			continue
		}
		ev.post(e)
	}
}

// post gives e to the subscriber, or drops it where there is none or it
// lags.
func (ev *bgEvents) post(e BgEvent) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	select {
	case ev.sub <- e:
	default:
	}
}

// end closes the subscriber's channel as the reader returns.
func (ev *bgEvents) end() {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.ended = true
	if ev.sub != nil {
		close(ev.sub)
		ev.sub = nil
	}
}

// subscribe makes a new subscriber (ending the last one's channel) and
// the function that ends it.
func (ev *bgEvents) subscribe() (<-chan BgEvent, func(), error) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.ended {
		return nil, nil, errors.New("the classifier's event reader has ended (the host is closed)")
	}
	if ev.sub != nil {
		close(ev.sub)
	}
	c := make(chan BgEvent, bgEventBuffer)
	ev.sub = c
	cancel := func() {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		if ev.sub == c {
			close(c)
			ev.sub = nil
		}
	}
	return c, cancel, nil
}

// BgEvents subscribes to the classifier's episode events (not the held
// ACKs', which the host paces itself) until the returned function is
// called or the host closes, either of which closes the channel. There
// is one subscriber: a new one ends the last.
func (b *BackgroundClass) BgEvents() (<-chan BgEvent, func(), error) {
	if b.events == nil {
		return nil, nil, fmt.Errorf("no event reader: %w", b.eventsErr)
	}
	return b.events.subscribe()
}
