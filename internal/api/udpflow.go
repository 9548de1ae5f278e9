// udpflow.go: the record of one UDP flow (QUIC included) with its lane and
// why, as the udp-flows op answers it; internal/udpflow lists them.
package api

import (
	"strings"

	"github.com/lanes-net/lanes/internal/lane"
)

// UDPProto is the proto field of every UDPFlow ("udp"), beside the TCP
// monitor's records in `lanes monitor --json`.
const UDPProto = "udp"

// UDPFlow is one UDP socket, or one 5-tuple only the classifier's maps
// know (Cookie 0).
type UDPFlow struct {
	Proto  string `json:"proto"`
	Cookie uint64 `json:"cookie,omitempty"`
	Src    string `json:"src"`
	// Dst is the connected socket's remote; "*:*" for an unconnected one.
	Dst string `json:"dst"`
	// Remotes are the remotes the background class's table holds for the
	// socket's local address and port (unconnected sockets, QUIC).
	Remotes []string  `json:"remotes,omitempty"`
	State   string    `json:"state"` // "connected", "unconnected", "class table"
	UID     uint32    `json:"uid"`
	Inode   uint32    `json:"inode,omitempty"`
	Cgroup  uint64    `json:"cgroup,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Comm    string    `json:"comm,omitempty"`
	RecvQ   uint32    `json:"recv_q_bytes"`   // receive memory in use
	SendQ   uint32    `json:"send_q_bytes"`   // send memory in use
	Drops   uint32    `json:"drops"`          // datagrams the socket dropped on receive
	DSCP    uint8     `json:"dscp,omitempty"` // the socket's own marking (IP_TOS, IPV6_TCLASS)
	Lane    lane.Lane `json:"lane"`
	Why     string    `json:"why"`
	// BgClass: the flow is in the background class's table (its datagrams
	// are policed as background non-TCP traffic); BgHeld: the class of
	// its interface is held now (the foreground is active).
	BgClass bool `json:"bg_class,omitempty"`
	BgHeld  bool `json:"bg_held,omitempty"`
	// Daemon: the lanes daemon's own socket (left out of the views unless
	// asked for with -v).
	Daemon bool `json:"daemon,omitempty"`
	// Sent and Received are the bytes of the socket's local port's
	// datagrams on the managed interfaces (the classifier's counts), read
	// at CountedAt (Unix ns); 0 where nothing counted them. Two listings
	// give the rates (UpBps, DownBps: bits/s, filled by the client from
	// its previous listing).
	Sent      uint64  `json:"sent_bytes,omitempty"`
	Received  uint64  `json:"received_bytes,omitempty"`
	CountedAt int64   `json:"counted_at_ns,omitempty"`
	UpBps     float64 `json:"up_bps,omitempty"`
	DownBps   float64 `json:"down_bps,omitempty"`
}

// Connected says whether the socket has a remote.
func (f *UDPFlow) Connected() bool { return f.State == "connected" }

// Peers is what a table shows as a flow's remote: the connected remote,
// else the class table's remotes, else "*:*".
func (f *UDPFlow) Peers() string {
	if f.Connected() || len(f.Remotes) == 0 {
		return f.Dst
	}
	return strings.Join(f.Remotes, ",")
}
