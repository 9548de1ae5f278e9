// Package api is the lanes daemon's control protocol: its wire types
// (requests, replies, status, registered and UDP flows) and request
// decoding. It imports no other part of lanes but the lane names, so that
// the public Go client (package client) pulls in no BPF object and no
// plotting; the daemon's side (authorization, the server, its limits) is
// internal/apiserver.
//
// Protocol (docs/api.md): a unix stream socket; each request is one line of
// JSON, each reply one line of JSON, in order; a connection may carry many
// requests. Lines are limited to MaxLine bytes. Callers are identified by the
// kernel (SO_PEERCRED), never by what they claim.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/lanes-net/lanes/internal/lane"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/lanes/lanes.sock"

// MaxLine bounds one request or reply line.
const MaxLine = 64 << 10

// Operations.
const (
	OpPing       = "ping"
	OpStatus     = "status"
	OpFlows      = "flows"
	OpRegister   = "register"   // put a flow (3-tuple) in a lane
	OpUnregister = "unregister" // remove a flow registration
	OpMovePID    = "move-pid"   // put a process (and its future children) in a lane
	OpLaneCgroup = "lane-cgroup"
	OpSockLanes  = "socket-lanes" // lanes of sockets by cookie (for the TCP monitor)
	OpComponent  = "component"    // a component's detailed state (coop, realtime) as JSON
	OpUDPFlows   = "udp-flows"    // the UDP flows (QUIC included) with their lanes and why
	// OpEvents turns the connection into a stream: after its reply the
	// daemon sends one Response line per Event until the connection
	// closes (events.go).
	OpEvents = "events"
)

// MaxCookies bounds one socket-lanes request.
const MaxCookies = 2048

// Flow is the paper's registration key: destination IP, destination port,
// source port (read with getsockname after connect), and the protocol; with
// the local address, the full 5-tuple. The API defaults Proto to tcp; Src
// (optional) narrows whose sockets the registration may name and move.
type Flow struct {
	Dst   string `json:"dst"`
	DPort uint16 `json:"dport"`
	SPort uint16 `json:"sport"`
	Proto string `json:"proto,omitempty"` // "tcp" (default) or "udp"
	Src   string `json:"src,omitempty"`   // local address; "" = any
}

// ProtoAny is the protocol of a policy rule's flow in Status: a policy
// rule (destination, ports) matches TCP, UDP and every other protocol. A
// registration cannot name it.
const ProtoAny = "any"

func (f Flow) String() string {
	p := f.Proto
	if p == "" {
		p = "tcp"
	}
	s := p + " " + f.Dst
	if f.DPort != 0 { // a policy rule's destination may have no port
		s += fmt.Sprintf(" dport %d", f.DPort)
	}
	if f.SPort != 0 {
		s += fmt.Sprintf(" sport %d", f.SPort)
	}
	if f.Src != "" {
		s += " src " + f.Src
	}
	return s
}

// Validate checks a flow key.
func (f Flow) Validate() error {
	if _, err := netip.ParseAddr(f.Dst); err != nil {
		return fmt.Errorf("flow dst %q is not an IP address", f.Dst)
	}
	if f.DPort == 0 {
		return errors.New("flow dport missing")
	}
	if f.SPort == 0 {
		return errors.New("flow sport missing (read it with getsockname after connect)")
	}
	if f.Proto != "" && f.Proto != "tcp" && f.Proto != "udp" {
		return fmt.Errorf("flow proto %q: want tcp or udp", f.Proto)
	}
	if f.Src != "" {
		if _, err := netip.ParseAddr(f.Src); err != nil {
			return fmt.Errorf("flow src %q is not an IP address", f.Src)
		}
	}
	return nil
}

// canonical gives a valid flow its one spelling, so that two requests for
// the same flow are one key for the registrations, their ownership and the
// datapath: the documented default proto made explicit (an empty proto in
// the datapath's key would match any protocol, while ownership was checked
// for TCP only), and addresses in their canonical form, an IPv4-mapped
// IPv6 address as IPv4 (the socket tables and the classifier see IPv4:
// "::ffff:10.66.1.2" registered beside "10.66.1.2" made a second key whose
// unregister removed the first one's datapath entry).
func (f *Flow) canonical() {
	if f.Proto == "" {
		f.Proto = "tcp"
	}
	if a, err := netip.ParseAddr(f.Dst); err == nil {
		f.Dst = a.Unmap().String()
	}
	if a, err := netip.ParseAddr(f.Src); err == nil {
		f.Src = a.Unmap().String()
	}
}

// Request is one client request.
type Request struct {
	Op   string    `json:"op"`
	Flow *Flow     `json:"flow,omitempty"`
	Lane lane.Lane `json:"lane,omitempty"`
	PID  int       `json:"pid,omitempty"`
	// Cookies are socket cookies (SO_COOKIE, sock_diag's idiag_cookie).
	Cookies []uint64 `json:"cookies,omitempty"`
	// Name is the component asked about (component op).
	Name string `json:"name,omitempty"`
	// KeepSched (move-pid): leave the process's CPU scheduling as it is.
	KeepSched bool `json:"keep_sched,omitempty"`
	// From (udp-flows): the index of the first flow of the page asked for.
	From int `json:"from,omitempty"`
}

// DecodeRequest parses and checks one request line. It never panics; every
// malformed input is an error that can be sent back to the client.
func DecodeRequest(line []byte) (Request, error) {
	var r Request
	if len(line) > MaxLine {
		return r, fmt.Errorf("request longer than %d bytes", MaxLine)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("bad request: %w", err)
	}
	if dec.More() {
		return Request{}, errors.New("bad request: trailing data after the JSON object")
	}
	switch r.Op {
	case OpPing, OpStatus, OpFlows:
	case OpRegister:
		if r.Flow == nil {
			return Request{}, errors.New("register needs a flow")
		}
		if err := r.Flow.Validate(); err != nil {
			return Request{}, err
		}
		r.Flow.canonical()
		if r.Lane == lane.Unset {
			return Request{}, errors.New("register needs a lane")
		}
	case OpUnregister:
		if r.Flow == nil {
			return Request{}, errors.New("unregister needs a flow")
		}
		if err := r.Flow.Validate(); err != nil {
			return Request{}, err
		}
		r.Flow.canonical()
	case OpMovePID:
		if r.PID <= 0 {
			return Request{}, errors.New("move-pid needs a pid > 0")
		}
		if r.Lane == lane.Unset {
			return Request{}, errors.New("move-pid needs a lane")
		}
	case OpLaneCgroup:
		if r.Lane == lane.Unset {
			return Request{}, errors.New("lane-cgroup needs a lane")
		}
	case OpSockLanes:
		if len(r.Cookies) > MaxCookies {
			return Request{}, fmt.Errorf("socket-lanes: at most %d cookies per request", MaxCookies)
		}
	case OpUDPFlows:
		if r.From < 0 {
			return Request{}, errors.New("udp-flows: from must be >= 0")
		}
	case OpEvents:
	case OpComponent:
		if r.Name == "" || len(r.Name) > 64 {
			return Request{}, errors.New("component needs a name (coop or realtime)")
		}
	case "":
		return Request{}, errors.New("bad request: missing op")
	default:
		return Request{}, fmt.Errorf("unknown op %q", r.Op)
	}
	return r, nil
}

// Response is one reply. Exactly one of the payload fields is set on success.
type Response struct {
	OK     bool       `json:"ok"`
	Error  string     `json:"error,omitempty"`
	Status *Status    `json:"status,omitempty"`
	Flows  []FlowInfo `json:"flows,omitempty"`
	Cgroup string     `json:"cgroup,omitempty"`
	// SocketLanes answers socket-lanes: cookie (decimal) -> lane, for the
	// cookies whose socket lanes has seen; others are absent.
	SocketLanes map[string]lane.Lane `json:"socket_lanes,omitempty"`
	// SocketWhy answers socket-lanes too: cookie -> what decided the lane
	// (the registration, rule, lane cgroup or marking), where known.
	SocketWhy map[string]string `json:"socket_why,omitempty"`
	// SocketAppCC answers socket-lanes too: cookie -> the congestion
	// control a background socket's app asked for and did not get (the
	// socket keeps LEDBAT++); CCNames: the kernel names of lanes' own
	// congestion controls -> what they are ("ledbat", "capcc").
	SocketAppCC map[string]string `json:"socket_app_cc,omitempty"`
	CCNames     map[string]string `json:"cc_names,omitempty"`
	// Component answers component: the component's own status document
	// (e.g. internal/coop's Status for "coop").
	Component json.RawMessage `json:"component,omitempty"`
	// Off answers component for a component the policy leaves off: why
	// ("no coop section in the policy"). It is no error.
	Off string `json:"off,omitempty"`
	// Moved answers move-pid: what the move changed.
	Moved *Moved `json:"moved,omitempty"`
	// UDPFlows answers udp-flows: a page of the UDP sockets of the
	// daemon's namespace and the background class's 5-tuples no socket
	// claims; UDPMore: how many follow the page (ask again with From).
	UDPFlows []UDPFlow `json:"udp_flows,omitempty"`
	UDPMore  int       `json:"udp_more,omitempty"`
	// Event is one line of an events stream.
	Event *Event `json:"event,omitempty"`
	// Stream: the reply opens an events stream (not sent).
	Stream bool `json:"-"`
}

// Moved is what one move-pid changed: the process's cgroup, the open
// sockets it holds (per protocol) and its CPU scheduling.
type Moved struct {
	Processes int `json:"processes"`
	TCP       int `json:"tcp"` // open TCP sockets now in the lane
	UDP       int `json:"udp"` // open UDP sockets (QUIC included)
	// Sched says what happened to its CPU scheduling: "nice 19" (into
	// background), "restored" (back to what it had), "kept".
	Sched string `json:"sched,omitempty"`
}

// OffError is a component that the policy leaves off: not a failure, a
// state to report as such (`lanes coop status` exits 0 with it). The
// daemon's Component returns it; the component op's reply carries its Why.
type OffError struct {
	Name string // the component ("coop", "realtime")
	Why  string // what in the policy leaves it off
}

func (e *OffError) Error() string { return e.Name + ": off (" + e.Why + ")" }

// FlowInfo is one registered flow.
type FlowInfo struct {
	Flow   Flow      `json:"flow"`
	Lane   lane.Lane `json:"lane"`
	Source string    `json:"source"` // "api", "policy:<rule>"
	UID    uint32    `json:"uid"`    // who registered it
}

// LaneStats is one lane's counters on one interface.
type LaneStats struct {
	Lane           lane.Lane `json:"lane"`
	Packets        uint64    `json:"packets"`
	Bytes          uint64    `json:"bytes"`
	Drops          uint64    `json:"drops"`
	Overlimits     uint64    `json:"overlimits"`
	BacklogBytes   uint64    `json:"backlog_bytes"`
	BacklogPackets uint64    `json:"backlog_packets"`
}

// InterfaceStatus is what lanes does on one interface.
type InterfaceStatus struct {
	Name       string            `json:"name"`
	Mode       string            `json:"mode"`
	UplinkBps  uint64            `json:"uplink_bps,omitempty"`
	Lanes      []LaneStats       `json:"lanes"`
	Classifier map[string]uint64 `json:"classifier"`        // packets per match kind
	Sockops    map[string]uint64 `json:"sockops,omitempty"` // sock_ops events (caps set, CC switches, ...)
	// CwndCapCC is how cwnd caps are enforced: "<name>" of the lanes
	// congestion control (CUBIC with the cap enforced on every ACK), or
	// "clamp only: <why>" when it could not be loaded.
	CwndCapCC string `json:"cwnd_cap_cc,omitempty"`
	// BackgroundCC is the background lane's congestion control:
	// "LEDBAT++ <name>, target <d>"; without struct_ops "cwnd clamp:
	// ..." (the system's congestion control, LEDBAT++'s window its clamp
	// from sock_ops); "system: <why>" when neither holds background
	// sockets (off by policy, or no sock_ops).
	BackgroundCC string `json:"background_cc,omitempty"`
	// BackgroundMode is how background uploads are held: "congestion
	// control" (LEDBAT++, struct_ops), "cwnd clamp" (LEDBAT++'s window
	// from sock_ops) or "none".
	BackgroundMode string `json:"background_mode,omitempty"`
	// Queue says where this interface's queue forms (on the device, or
	// not: remote); Protection what protects the foreground there.
	Queue      string `json:"queue,omitempty"`
	Protection string `json:"protection,omitempty"`
	// Downloads says what holds background downloads back at a remote
	// bottleneck: rLEDBAT in BPF, from the daemon (and its interval), or
	// "none: <why>".
	Downloads string `json:"background_downloads,omitempty"`
	// NonTCP says what holds the background lane's QUIC and other non-TCP
	// traffic on this interface, per direction, what holds it now, and
	// what is not held.
	NonTCP string `json:"background_non_tcp,omitempty"`
	// BackgroundNow is what steers the background on this interface now
	// (the foreground-aware yield: no foreground, a present one and its
	// TCP RTT samples, a harmed one, an opening) and the share of the
	// queue target it keeps; "" with the yield off.
	BackgroundNow string `json:"background_now,omitempty"`
	// InteractiveLeaf is the interactive lane's leaf qdisc: "fq_codel"
	// (each flow its own queue, CoDel at 5 ms) or "bfifo" where the kernel
	// has no fq_codel.
	InteractiveLeaf string `json:"interactive_leaf,omitempty"`
	// Account is this interface's account per direction (up, then down),
	// as sock_ops keeps it; none without lanes' own sock_ops.
	Account []LinkAccount `json:"account,omitempty"`
}

// LinkAccount is one direction's account on an interface: the link's
// capacity estimate, whose its queue is by the last cause test (a hold of
// background while the foreground's delay is watched), and whether
// background is held there now.
type LinkAccount struct {
	Dir string `json:"dir"` // "up" or "down"
	// CapacityBps is the capacity estimate in bit/s, halved every 10 s:
	// up, the largest delivery rate of an unheld socket; down, the
	// interface's largest arrival rate over a status interval; 0: not
	// measured.
	CapacityBps uint64 `json:"capacity_bps,omitempty"`
	// Shares: each lane's rate in this direction over the last status
	// interval and its fraction of CapacityBps (up only: the lanes' tc
	// class bytes; downloads have no per-lane counters).
	Shares []LaneShare `json:"shares,omitempty"`
	// Why the background is where it is: "free", "sharing", "held by
	// harm", "held by an opening", "held by untold", "not ours" (the
	// queue's test found it not background's: released) or "at its
	// floor, ACKs paced" (a download at rLEDBAT's minimum by its queue
	// beside a foreground).
	Why string `json:"why,omitempty"`
	// QueueOwner is "background", "not background", "testing" or
	// "untested"; TestedAgoMS how long ago that test ended (or began).
	QueueOwner  string `json:"queue_owner"`
	TestedAgoMS int64  `json:"tested_ago_ms,omitempty"`
	Tests       uint64 `json:"cause_tests,omitempty"`    // cause tests started
	NotOurs     uint64 `json:"not_background,omitempty"` // of them, found not the background's
	Held        bool   `json:"held"`                     // background held in this direction now
}

// LaneShare is one lane's rate in a direction and its share of the
// capacity estimate (0 where there is none).
type LaneShare struct {
	Lane  lane.Lane `json:"lane"`
	Bps   uint64    `json:"bps"`
	Share float64   `json:"share"`
}

// Status is the daemon's state.
type Status struct {
	Version    string            `json:"version"`
	Policy     string            `json:"policy"`
	StartedAt  string            `json:"started_at"`
	Netns      Netns             `json:"netns"` // the network namespace this daemon manages
	Interfaces []InterfaceStatus `json:"interfaces"`
	Flows      []FlowInfo        `json:"flows"`
	Components map[string]string `json:"components,omitempty"` // one line each for people, e.g. coop: "capping, N=3"
	// RestartKeys: the running policy's keys that only a restart applies,
	// with their values (a reload, and --check, refuse changing them).
	RestartKeys map[string]string `json:"restart_keys,omitempty"`
	// PolicyRefused: the policy file on disk was refused at the last reload
	// (the running policy stays); nil when the file runs.
	PolicyRefused *PolicyRefused `json:"policy_refused,omitempty"`
	// Capabilities: each optional datapath capability, "on" or "off: why"
	// (sock_ops, cap_cc, background_cc, rledbat).
	Capabilities map[string]string `json:"capabilities,omitempty"`
	// Details holds each component's status document, structured (the
	// component op's answer), beside the one-line summaries.
	Details map[string]json.RawMessage `json:"details,omitempty"`
}

// PolicyRefused is a reload that refused the policy file: when (RFC 3339,
// UTC), how many errors, the first of them, and when the running policy was
// read.
type PolicyRefused struct {
	At      string `json:"at"`
	Errors  int    `json:"errors"`
	First   string `json:"first"`
	Running string `json:"running_since"`
}

// BackgroundQueued says whether the background lane holds a backlog in
// lanes' queue on some interface: its packets wait while the other lanes
// are served first (a background flow's srtt is then mostly that wait).
func (s *Status) BackgroundQueued() bool {
	for _, it := range s.Interfaces {
		for _, l := range it.Lanes {
			if l.Lane == lane.Background && l.BacklogBytes > 0 {
				return true
			}
		}
	}
	return false
}
