// announcer.go: the announcer: this host's announcements out. It owns the
// transport, the group key that signs them, the sequence number and the
// spacing kept between them (spacing.go); the Controller fills in the
// load (group.go) and records what sending did. The sequence and the
// spacing are guarded by the Controller's mu; sending happens outside it.
package coop

import (
	"log/slog"
	"sync"
	"time"
)

// reopener is a transport that may have a family left to open
// (UDPTransport: its port was held, its address not there yet).
type reopener interface {
	Reopen() bool
	Missing() string
}

// announcer sends this host's announcements and its goodbye.
type announcer struct {
	tr        Transport
	reopen    reopener // the UDP transport New opened; nil for a transport given
	key       []byte   // the group key; nil: unauthenticated
	hostID    uint64
	base      time.Duration // the configured interval
	seq       uint64
	spacing   spacing
	closeOnce sync.Once
}

// step starts the next announcement, sent at now. Caller holds mu.
func (n *announcer) step(now time.Time) {
	n.seq++
	n.spacing.note(now)
}

// header is the current announcement's header, without the load. Caller
// holds mu.
func (n *announcer) header(now time.Time) Announcement {
	return Announcement{HostID: n.hostID, Seq: n.seq, Time: now, Interval: n.spacing.interval(n.base)}
}

// goodbye is the announcement that this host leaves. Caller holds mu.
func (n *announcer) goodbye(now time.Time) Announcement {
	n.seq++
	return Announcement{HostID: n.hostID, Seq: n.seq, Time: now, Interval: n.base, Leaving: true}
}

// send signs and sends a (outside mu: it may block).
func (n *announcer) send(a *Announcement) error { return n.tr.Send(Encode(a, n.key)) }

// reopened tries to open a transport family that could not be opened
// before; it returns the families still missing, and false for a
// transport that cannot reopen.
func (n *announcer) reopened(log *slog.Logger) (string, bool) {
	if n.reopen == nil {
		return "", false
	}
	if n.reopen.Reopen() {
		log.Info("coop: a transport family that could not be opened is open now", "still_missing", n.reopen.Missing())
	}
	return n.reopen.Missing(), true
}

// close releases the transport once.
func (n *announcer) close() error {
	var err error
	n.closeOnce.Do(func() { err = n.tr.Close() })
	return err
}
