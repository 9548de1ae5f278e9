// trace.go: the trace of each datagram's admission, refusal, release and
// drop (the lab's timestamps 2 and 3, enqueue and dequeue): lanes-rtd
// writes its events to a pipe, read here into the lane's trace function.
package rtlane

import (
	"encoding/binary"
	"time"
)

// EventKind is a point in a datagram's life, for traces (the lab's
// timestamps 2 and 3: enqueue and dequeue).
type EventKind uint8

const (
	EvAdmit   EventKind = iota + 1 // admitted and queued (enqueue)
	EvReject                       // refused at once
	EvRelease                      // popped and about to be sent (dequeue)
	EvDrop                         // popped but late, or send failed
)

// Event is one trace record.
type Event struct {
	Kind     EventKind
	Time     int64 // CLOCK_MONOTONIC ns
	UID      uint32
	Flow     uint32
	Seq      uint32
	Deadline int64
	Tx       int64
	Reason   uint8
}

// readTrace turns lanes-rtd's trace events into calls of the lane's trace
// function.
func (p *rtdProc) readTrace(trace func(Event)) {
	buf := make([]byte, 40*256)
	var carry []byte
	for {
		n, err := p.trace.Read(buf)
		if n > 0 {
			carry = append(carry, buf[:n]...)
			for len(carry) >= 40 {
				var e rtdEvent
				_, _ = binary.Decode(carry[:40], binary.NativeEndian, &e)
				carry = carry[40:]
				if e.Kind == 0 { // a sync event (SyncTrace)
					select {
					case p.synced <- e.Seq:
					default:
					}
					continue
				}
				trace(Event{Kind: EventKind(e.Kind), Time: e.Time, UID: e.UID, Flow: e.Flow, Seq: e.Seq,
					Deadline: e.Deadline, Tx: e.Tx, Reason: e.Reason})
			}
			carry = append([]byte(nil), carry...)
		}
		if err != nil {
			return
		}
	}
}

// SyncTrace returns once every trace event of what the lane has done so
// far has been passed to the trace function (lanes-rtd's events arrive
// through a pipe; in-process they are synchronous), or after a second.
func (l *Lane) SyncTrace() {
	p := l.rtd
	if p == nil || p.trace == nil {
		return
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.syncID++
	if p.send(&rtdHdr{Type: rtdTraceSync, Conn: p.syncID}, -1) != nil {
		return
	}
	timeout := time.After(time.Second)
	for {
		select {
		case id := <-p.synced:
			if id == p.syncID {
				return
			}
		case <-timeout:
			return
		}
	}
}
