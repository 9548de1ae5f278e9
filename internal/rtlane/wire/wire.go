// Package wire is the realtime lane's client protocol over a unix
// SOCK_SEQPACKET socket (docs/realtime.md): fixed big-endian headers, one
// message per datagram. Shared by the daemon side (rtlane) and the Go client
// (rtclient); include/lanes_rt.h is the same format for C.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Version is the protocol version carried in every message.
const Version = 1

// Sizes of the fixed headers.
const (
	RequestSize = 40
	ReplySize   = 32
	// MaxPayload is the largest UDP payload over IPv4.
	MaxPayload = 65507
	// MaxReplyBody bounds a reply's body (TypeStatsOK JSON): the daemon
	// trims what it sends to fit, so a reply always fits MaxReply.
	MaxReplyBody = 60 << 10
	MaxReply     = ReplySize + MaxReplyBody
)

// Message types. Requests are < 0x80, replies >= 0x80.
const (
	TypeSend     = 0x01 // datagram with deadline
	TypeStats    = 0x02 // ask for counters (reply TypeStatsReply, JSON)
	TypeAttach   = 0x03 // hand the daemon a UDP socket (one fd in SCM_RIGHTS)
	TypeAdmit    = 0x81 // admitted, will be sent by its deadline or reported
	TypeReject   = 0x82 // refused at once, nothing sent
	TypeDropped  = 0x83 // admitted but would have been late at release: not sent
	TypeError    = 0x84 // malformed request or not granted
	TypeStatsOK  = 0x85 // JSON counters follow the header
	TypeAttached = 0x86 // the socket is the connection's socket Reply.Sock
)

// MaxSocks bounds the sockets one connection may attach; Request.Sock
// 1..MaxSocks names one of them, 0 the daemon's own.
const MaxSocks = 8

// Request flags.
const (
	FlagRelative = 0x01 // Deadline is µs after the daemon receives the request
)

// Reasons in replies.
const (
	ReasonNone        = 0
	ReasonDisplaces   = 1  // would make an admitted packet late (T_ins > M_i)
	ReasonOwnDeadline = 2  // cannot itself be sent by its deadline
	ReasonNotGranted  = 3  // the policy grants this peer no realtime lane
	ReasonMalformed   = 4  // bad header, version or size
	ReasonQueueFull   = 5  // max_queue reached
	ReasonBadDest     = 6  // destination address or port unusable
	ReasonTooBig      = 7  // payload above the UDP maximum
	ReasonLate        = 8  // (Dropped) its deadline could no longer be met at release
	ReasonSendError   = 9  // (Dropped) the kernel refused the datagram
	ReasonShutdown    = 10 // (Dropped) the daemon stopped with it queued
	ReasonDisabled    = 11 // the realtime lane is disabled
	ReasonBusy        = 12 // (Error) too many connections, in total or of this uid: the daemon closes it
	ReasonBadSocket   = 13 // not a UDP socket of this network namespace, no such socket, or no fd passed
	ReasonTooMany     = 14 // (Attach) the connection has MaxSocks sockets already
	ReasonUnsupported = 15 // (Attach) the kernel cannot give one datagram its priority (SO_PRIORITY cmsg: 6.14+)
	ReasonBadDeadline = 16 // the deadline lies beyond the horizon (more than DeadlineHorizon from receipt)
	ReasonOverShare   = 17 // this connection or uid holds its share of the queue's slots or bytes, or the link's time
)

// DeadlineHorizon bounds a deadline's distance from the request's
// receipt, either way (ns); beyond it the request is refused
// ReasonBadDeadline, so that no deadline's arithmetic can wrap.
const DeadlineHorizon = 60_000_000_000

var reasonNames = map[uint8]string{
	ReasonNone: "none", ReasonDisplaces: "would-make-others-late", ReasonOwnDeadline: "own-deadline-unmeetable",
	ReasonNotGranted: "not-granted", ReasonMalformed: "malformed", ReasonQueueFull: "queue-full",
	ReasonBadDest: "bad-destination", ReasonTooBig: "too-big", ReasonLate: "late-at-release",
	ReasonSendError: "send-error", ReasonShutdown: "shutdown", ReasonDisabled: "disabled",
	ReasonBusy: "too-many-connections", ReasonBadSocket: "bad-socket", ReasonTooMany: "too-many-sockets",
	ReasonUnsupported: "unsupported", ReasonBadDeadline: "deadline-out-of-range", ReasonOverShare: "over-share",
}

// ReasonString names a reason code.
func ReasonString(r uint8) string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("reason-%d", r)
}

// Request is a client-to-daemon message.
type Request struct {
	Type     uint8
	Flags    uint8
	Flow     uint32
	Seq      uint32
	Deadline uint64 // CLOCK_MONOTONIC ns, or µs from receipt with FlagRelative
	// Sock: 0 sends from the daemon's own socket, 1..MaxSocks from the
	// connection's attached socket of that number.
	Sock uint16
	// Dst: the destination; unset (family 0) on an attached connected
	// socket sends to its peer.
	Dst     netip.AddrPort
	Payload []byte
}

// Reply is a daemon-to-client message.
type Reply struct {
	Type   uint8
	Reason uint8
	Sock   uint8 // TypeAttached: the socket's number for Request.Sock
	Flow   uint32
	Seq    uint32
	Depth  uint32 // realtime queue length after the decision
	Slack  int64  // ns the whole queue may still slip (M_1) after an admission
	Time   uint64 // CLOCK_MONOTONIC ns of the decision, drop or reply
	Body   []byte // TypeStatsOK: JSON
}

// ErrMalformed marks a message that does not parse.
var ErrMalformed = errors.New("malformed message")

// AppendRequest encodes r after b.
func AppendRequest(b []byte, r *Request) []byte {
	var h [RequestSize]byte
	h[0] = Version
	h[1] = r.Type
	h[2] = r.Flags
	a := r.Dst.Addr()
	switch {
	case a.Is4():
		h[3] = 4
		a4 := a.As4()
		copy(h[24:], a4[:])
	case a.Is6():
		h[3] = 6
		a16 := a.As16()
		copy(h[24:], a16[:])
	}
	binary.BigEndian.PutUint32(h[4:], r.Flow)
	binary.BigEndian.PutUint32(h[8:], r.Seq)
	binary.BigEndian.PutUint16(h[12:], r.Dst.Port())
	binary.BigEndian.PutUint16(h[14:], r.Sock)
	binary.BigEndian.PutUint64(h[16:], r.Deadline)
	b = append(b, h[:]...)
	return append(b, r.Payload...)
}

// ParseRequest decodes one request; Payload aliases b.
func ParseRequest(b []byte) (Request, error) {
	var r Request
	if len(b) < RequestSize {
		return r, fmt.Errorf("%w: %d bytes, header is %d", ErrMalformed, len(b), RequestSize)
	}
	if b[0] != Version {
		return r, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[0], Version)
	}
	r.Type, r.Flags = b[1], b[2]
	r.Flow = binary.BigEndian.Uint32(b[4:])
	r.Seq = binary.BigEndian.Uint32(b[8:])
	port := binary.BigEndian.Uint16(b[12:])
	r.Sock = binary.BigEndian.Uint16(b[14:])
	r.Deadline = binary.BigEndian.Uint64(b[16:])
	switch b[3] {
	case 4:
		r.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[24:28])), port)
	case 6:
		r.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[24:40])).Unmap(), port)
	case 0:
	default:
		return r, fmt.Errorf("%w: address family %d", ErrMalformed, b[3])
	}
	r.Payload = b[RequestSize:]
	return r, nil
}

// AppendReply encodes r after b.
func AppendReply(b []byte, r *Reply) []byte {
	var h [ReplySize]byte
	h[0] = Version
	h[1] = r.Type
	h[2] = r.Reason
	h[3] = r.Sock
	binary.BigEndian.PutUint32(h[4:], r.Flow)
	binary.BigEndian.PutUint32(h[8:], r.Seq)
	binary.BigEndian.PutUint32(h[12:], r.Depth)
	binary.BigEndian.PutUint64(h[16:], uint64(r.Slack))
	binary.BigEndian.PutUint64(h[24:], r.Time)
	b = append(b, h[:]...)
	return append(b, r.Body...)
}

// ParseReply decodes one reply; Body aliases b.
func ParseReply(b []byte) (Reply, error) {
	var r Reply
	if len(b) < ReplySize {
		return r, fmt.Errorf("%w: %d bytes, reply header is %d", ErrMalformed, len(b), ReplySize)
	}
	if b[0] != Version {
		return r, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[0], Version)
	}
	r.Type, r.Reason, r.Sock = b[1], b[2], b[3]
	r.Flow = binary.BigEndian.Uint32(b[4:])
	r.Seq = binary.BigEndian.Uint32(b[8:])
	r.Depth = binary.BigEndian.Uint32(b[12:])
	r.Slack = int64(binary.BigEndian.Uint64(b[16:]))
	r.Time = binary.BigEndian.Uint64(b[24:])
	r.Body = b[ReplySize:]
	return r, nil
}
