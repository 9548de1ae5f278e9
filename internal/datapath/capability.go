// capability.go: the one table of the host datapath's optional
// capabilities; status, `lanes daemon --without` (its help, completion and
// check) and the docs' lists are made from it or tested against it.
package datapath

// Capability is an optional part of the host datapath.
type Capability string

const (
	CapSockops      Capability = "sock_ops"
	CapCapCC        Capability = "cap_cc"
	CapBackgroundCC Capability = "background_cc"
	CapBgClamp      Capability = "background_clamp"
	CapRLEDBAT      Capability = "rledbat"
	CapBgCCKeep     Capability = "background_cc_keep"
	CapLiveCC       Capability = "live_cc"
	CapExecLane     Capability = "exec_lane"
	CapCCAllowLive  Capability = "cc_allow_live"
)

// CapabilityInfo is a capability and what it does, in one short line
// (--without's help).
type CapabilityInfo struct {
	Name Capability
	Does string
}

// Capabilities is the table, in status order. Every capability but
// sock_ops needs sock_ops.
var Capabilities = []CapabilityInfo{
	{CapSockops, "per-socket lanes, NOTSENT_LOWAT, cwnd caps"},
	{CapCapCC, "cwnd caps' congestion control on CUBIC sockets"},
	{CapBackgroundCC, "LEDBAT++ as background's congestion control"},
	{CapBgClamp, "LEDBAT++'s window as cwnd clamp, no background_cc"},
	{CapRLEDBAT, "rLEDBAT on background receive windows (5.11+)"},
	{CapBgCCKeep, "an app's TCP_CONGESTION skipped on background"},
	{CapLiveCC, "a moved socket's congestion control at the move (5.14+)"},
	{CapExecLane, "an exe: rule's lane decided at exec in the kernel"},
	{CapCCAllowLive, "the CC allow-list read at each write of it"},
}

// CapabilityNames are the table's names, in order.
func CapabilityNames() []Capability {
	out := make([]Capability, len(Capabilities))
	for i, c := range Capabilities {
		out[i] = c.Name
	}
	return out
}
