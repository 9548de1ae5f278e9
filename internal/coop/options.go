// options.go: what the daemon gives a Controller (Options): the flow
// source and its Flow, the uploads' cap setter and the announcements'
// transport.
package coop

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// Flow is one local uplink TCP connection, as sampled by the TCP monitor.
type Flow struct {
	Cookie     uint64
	Lane       lane.Lane
	App        string // application or policy rule that classified the flow
	MSS        uint32 // bytes
	Cwnd       uint32 // segments
	CAState    uint8
	SRTT       time.Duration
	MinRTT     time.Duration
	RcvRTT     time.Duration // receive-side RTT estimate (downloads; 0 = none)
	NotSent    uint64        // bytes in the socket not yet sent
	InFlight   uint64        // bytes sent, not yet acknowledged
	BytesAcked uint64        // cumulative
	BytesRecv  uint64        // cumulative, received (downloads)
	Retrans    uint32        // cumulative retransmitted segments
}

// FlowSource returns this host's uplink flows (through the managed
// interface). The daemon backs it with internal/tcpmon.
type FlowSource interface {
	UplinkFlows(ctx context.Context) ([]Flow, error)
}

// UplinkSetter applies the uploads' caps: a socket's cwnd cap and the cap
// new connections of a lane get at establishment (segments; 0 removes
// the cap). The daemon backs it with internal/datapath.
type UplinkSetter interface {
	SetSocketCwndCap(cookie uint64, segs uint32) error
	SetLaneCwndCap(l lane.Lane, segs uint32) error
}

// Transport carries announcements: broadcast send, receive with source.
type Transport interface {
	Send(b []byte) error
	Recv(b []byte) (int, netip.Addr, error)
	Close() error
}

// Options are a Controller's parts; Flows is required. A nil setter:
// that part's caps are computed and reported, none applied.
type Options struct {
	Config config.Coop
	Flows  FlowSource
	Up     UplinkSetter   // the uploads' cwnd caps
	Down   DownlinkSetter // the downloads' receive-window caps
	Ack    AckClassSetter // the downloads' ACK class (ackclass.go)
	// Iface: the managed interface's byte counters, which bound the
	// goodput the safety fallback judges by (arrivals.go); nil: unbounded
	Iface     IfaceCounter
	Transport Transport // nil: UDP broadcast on Config.Interface
	HostID    uint64    // 0: derived from machine-id and the interface
	Logger    *slog.Logger
	Now       func() time.Time // for tests
}
