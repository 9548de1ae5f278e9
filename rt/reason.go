// reason.go: why the daemon refused or dropped a datagram, as the wire
// numbers it (docs/realtime.md "Reasons").
package rt

import "github.com/lanes-net/lanes/internal/rtlane/wire"

// Reason is the daemon's reason code in a reply or notice.
type Reason uint8

// The reasons (the wire's numbers; String names them as docs/realtime.md
// and lanes_rt.h's lanes_rt_reason_str do).
const (
	ReasonNone        Reason = wire.ReasonNone
	ReasonDisplaces   Reason = wire.ReasonDisplaces   // would make an admitted datagram late
	ReasonOwnDeadline Reason = wire.ReasonOwnDeadline // cannot itself be sent by its deadline
	ReasonNotGranted  Reason = wire.ReasonNotGranted  // the policy grants this uid no realtime lane
	ReasonMalformed   Reason = wire.ReasonMalformed
	ReasonQueueFull   Reason = wire.ReasonQueueFull
	ReasonBadDest     Reason = wire.ReasonBadDest
	ReasonTooBig      Reason = wire.ReasonTooBig
	ReasonLate        Reason = wire.ReasonLate      // (notice) its deadline could no longer be met at release
	ReasonSendError   Reason = wire.ReasonSendError // (notice) the kernel refused the datagram
	ReasonShutdown    Reason = wire.ReasonShutdown  // (notice) the daemon stopped with it queued
	ReasonDisabled    Reason = wire.ReasonDisabled
	ReasonBusy        Reason = wire.ReasonBusy      // too many connections: the daemon closes this one
	ReasonBadSocket   Reason = wire.ReasonBadSocket // not a UDP socket of the daemon's namespace, or no such number
	ReasonTooMany     Reason = wire.ReasonTooMany   // (attach) the connection has MaxSocks sockets
	// ReasonUnsupported: (attach) the kernel cannot give one datagram its
	// priority (SO_PRIORITY control messages, Linux 6.14).
	ReasonUnsupported Reason = wire.ReasonUnsupported
	// ReasonBadDeadline: the deadline lies more than DeadlineHorizon from
	// the request's receipt, either way.
	ReasonBadDeadline Reason = wire.ReasonBadDeadline
	// ReasonOverShare: this connection or uid holds its share of the
	// queue's slots or bytes, or of the link's time up to the deadline.
	ReasonOverShare Reason = wire.ReasonOverShare
)

// DeadlineHorizon bounds a deadline's distance from the request's receipt
// (ns); a farther one is refused ReasonBadDeadline.
const DeadlineHorizon = wire.DeadlineHorizon

// String names the reason ("not-granted"); an unknown one is "reason-N".
func (r Reason) String() string { return wire.ReasonString(uint8(r)) }

// RefusedError is a request the daemon refused as a whole: an Attach, or
// a request answered with an ERROR reply (malformed, too many connections).
type RefusedError struct {
	Op     string // "attach", "send", "stats"
	Reason Reason
}

func (e *RefusedError) Error() string {
	if h := e.Reason.Help(); h != "" {
		return "realtime lane: " + e.Op + " refused: " + h
	}
	return "realtime lane: " + e.Op + " refused: " + e.Reason.String()
}
