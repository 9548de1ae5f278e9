// tcpinfo.go: decoding struct tcp_info (linux/tcp.h) from INET_DIAG_INFO by
// length.
//
// The kernel appends fields to struct tcp_info over the years and sends as
// many bytes as it knows; older kernels send fewer. Every field is read only
// if the attribute is long enough to hold it, so a short attribute leaves the
// newer fields zero and a longer one (a future kernel) is read up to what we
// know and the rest ignored.
package tcpmon

import "encoding/binary"

// CAState is the congestion-avoidance state of a socket (tcpi_ca_state).
type CAState uint8

const (
	CAOpen     CAState = 0
	CADisorder CAState = 1
	CACWR      CAState = 2
	CARecovery CAState = 3
	CALoss     CAState = 4
)

func (c CAState) String() string {
	switch c {
	case CAOpen:
		return "open"
	case CADisorder:
		return "disorder"
	case CACWR:
		return "cwr"
	case CARecovery:
		return "recovery"
	case CALoss:
		return "loss"
	}
	return "unknown"
}

// ParseCAState is the inverse of CAState.String.
func ParseCAState(s string) (CAState, bool) {
	for c := CAOpen; c <= CALoss; c++ {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}

// TCPInfo is the part of struct tcp_info the monitor reports. Times are in
// microseconds, rates in bytes per second, windows in segments, as the
// kernel gives them.
type TCPInfo struct {
	State        uint8
	CAState      CAState
	Retransmits  uint8 // consecutive retransmissions of the head segment
	RTO          uint32
	SndMSS       uint32
	Unacked      uint32 // segments in flight (packets_out)
	Sacked       uint32
	Lost         uint32
	Retrans      uint32 // segments retransmitted and not yet acked
	RTT          uint32 // smoothed RTT, µs
	RTTVar       uint32
	SndSSThresh  uint32
	SndCwnd      uint32
	TotalRetrans uint32
	PacingRate   uint64
	BytesAcked   uint64
	BytesRecv    uint64
	SegsOut      uint32
	SegsIn       uint32
	NotsentBytes uint32
	MinRTT       uint32
	DeliveryRate uint64
	BytesSent    uint64
	BytesRetrans uint64
	SndWnd       uint32
	RcvRTT       uint32 // receive-side RTT estimate, µs (downloads)
	// Time (µs) the socket spent sending (busy), and the part of it
	// limited by the receive window or the send buffer.
	BusyTime, RwndLimited, SndbufLimited uint64
	// AppLimited: the last delivery rate sample was application-limited.
	AppLimited bool
	Len        int // bytes the kernel sent (its sizeof(struct tcp_info))
}

// Offsets of the fields in struct tcp_info (linux/tcp.h); each field exists
// in a given kernel only if the attribute reaches past its end.
const (
	offState        = 0
	offCAState      = 1
	offRetransmits  = 2
	offRTO          = 8
	offSndMSS       = 16
	offUnacked      = 24
	offSacked       = 28
	offLost         = 32
	offRetrans      = 36
	offRTT          = 68
	offRTTVar       = 72
	offSndSSThresh  = 76
	offSndCwnd      = 80
	offTotalRetrans = 100
	offPacingRate   = 104
	offBytesAcked   = 120
	offBytesRecv    = 128
	offSegsOut      = 136
	offSegsIn       = 140
	offNotsent      = 144
	offMinRTT       = 148
	offAppLimited   = 7 // bit 0: tcpi_delivery_rate_app_limited
	offDeliveryRate = 160
	offBusyTime     = 168
	offRwndLimited  = 176
	offSndbufLimit  = 184
	offBytesSent    = 200
	offBytesRetrans = 208
	offSndWnd       = 228
	offRcvRTT       = 92
)

// ParseTCPInfo decodes b, the payload of an INET_DIAG_INFO attribute of a
// TCP socket. It never fails: fields beyond len(b) stay zero.
func ParseTCPInfo(b []byte) TCPInfo {
	le := binary.NativeEndian
	u8 := func(off int) uint8 {
		if off+1 <= len(b) {
			return b[off]
		}
		return 0
	}
	u32 := func(off int) uint32 {
		if off+4 <= len(b) {
			return le.Uint32(b[off:])
		}
		return 0
	}
	u64 := func(off int) uint64 {
		if off+8 <= len(b) {
			return le.Uint64(b[off:])
		}
		return 0
	}
	return TCPInfo{
		State:         u8(offState),
		CAState:       CAState(u8(offCAState)),
		Retransmits:   u8(offRetransmits),
		RTO:           u32(offRTO),
		SndMSS:        u32(offSndMSS),
		Unacked:       u32(offUnacked),
		Sacked:        u32(offSacked),
		Lost:          u32(offLost),
		Retrans:       u32(offRetrans),
		RTT:           u32(offRTT),
		RTTVar:        u32(offRTTVar),
		SndSSThresh:   u32(offSndSSThresh),
		SndCwnd:       u32(offSndCwnd),
		TotalRetrans:  u32(offTotalRetrans),
		PacingRate:    u64(offPacingRate),
		BytesAcked:    u64(offBytesAcked),
		BytesRecv:     u64(offBytesRecv),
		SegsOut:       u32(offSegsOut),
		SegsIn:        u32(offSegsIn),
		NotsentBytes:  u32(offNotsent),
		MinRTT:        u32(offMinRTT),
		DeliveryRate:  u64(offDeliveryRate),
		BytesSent:     u64(offBytesSent),
		BytesRetrans:  u64(offBytesRetrans),
		SndWnd:        u32(offSndWnd),
		RcvRTT:        u32(offRcvRTT),
		BusyTime:      u64(offBusyTime),
		RwndLimited:   u64(offRwndLimited),
		SndbufLimited: u64(offSndbufLimit),
		AppLimited:    u8(offAppLimited)&1 != 0,
		Len:           len(b),
	}
}
