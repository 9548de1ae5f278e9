// Package udpflow lists a network namespace's UDP flows (QUIC included)
// with their lanes: every UDP socket the kernel reports through sock_diag
// (per socket: cookie, addresses, owner uid, inode, cgroup, queues and
// receive drops), and the background class's flow table where only the
// classifier's maps know a flow (per 5-tuple: the remote of an unconnected
// socket, a flow whose socket is gone or not in this namespace). The
// daemon decides each flow's lane and why (internal/daemon/udpflows.go);
// `lanes status`, `lanes monitor` and the dashboard show the records.
//
// Note: the kernel keeps no byte or packet counters per UDP socket, and
// the classifier counts per match kind and lane, not per flow: a UDP
// flow's rate is not known. Unconnected sockets (a QUIC client's, any
// server's) have no remote; the background class's table gives the
// remotes its packets went to.
package udpflow

import (
	"fmt"
	"io"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// Flow is the wire record of one UDP flow (api.UDPFlow): this package
// fills it from the kernel and prints it.
type Flow = api.UDPFlow

// Proto is the proto field of every record ("udp").
const Proto = api.UDPProto

// Dump lists the UDP sockets of the calling thread's network namespace,
// both families, with lanes unset.
func Dump() ([]Flow, error) {
	var out []Flow
	err := tcpmon.DumpSockets(unix.IPPROTO_UDP, func(s *tcpmon.Sock) {
		out = append(out, fromSock(s))
	})
	if err != nil {
		return nil, fmt.Errorf("udp sockets: %w", err)
	}
	return out, nil
}

func fromSock(s *tcpmon.Sock) Flow {
	f := Flow{Proto: Proto, Cookie: s.Cookie, Src: addrString(s.Src), Dst: addrString(s.Dst), State: "connected",
		UID: s.UID, Inode: s.Inode, Cgroup: s.CgroupID, RecvQ: s.RQueue, SendQ: s.WQueue, DSCP: s.DSCP()}
	if s.Dst.Port() == 0 {
		f.State, f.Dst = "unconnected", "*:*"
	}
	if s.NSKMem > 8 {
		f.Drops = s.SKMem[8] // SK_MEMINFO_DROPS
	}
	return f
}

func addrString(a netip.AddrPort) string {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()).String()
}

// WriteBrief prints flows as a table of lane, process, remote, rates up and
// down (FillRates), background class and why; each line fits width
// columns (the why is cut).
func WriteBrief(w io.Writer, flows []Flow, width int) {
	const row = "%-11s %-14s %-21s %9s %9s %-7s %s"
	fmt.Fprintln(w, fitTo(fmt.Sprintf(row, "LANE", "PROCESS", "REMOTE", "UP", "DOWN", "CLASS", "WHY"), width))
	for i := range flows {
		f := &flows[i]
		fmt.Fprintln(w, fitTo(fmt.Sprintf(row, f.Lane, trunc(process(f), 14), trunc(f.Peers(), 21),
			FormatRate(f.UpBps), FormatRate(f.DownBps), class(f), f.Why), width))
	}
}

// FormatRate prints bits/s as people read it: "26.21Mbit", "0bit".
func FormatRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2fGbit", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2fMbit", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1fKbit", bps/1e3)
	}
	return fmt.Sprintf("%.0fbit", bps)
}

// fitTo cuts s to width runes, the last one an ellipsis.
func fitTo(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}

// process is f's owner as "comm/pid", or "-".
func process(f *Flow) string {
	if f.PID == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%d", f.Comm, f.PID)
}

// class is the background class's hold on the flow: "held", "policed", "-".
func class(f *Flow) string {
	switch {
	case f.BgHeld:
		return "held"
	case f.BgClass:
		return "policed"
	}
	return "-"
}

// WriteTable prints flows as an aligned table, every column whole.
func WriteTable(w io.Writer, flows []Flow) {
	const row = "%-11s %-18s %-23s %-23s %9s %9s %-11s %-10s %7s %s\n"
	fmt.Fprintf(w, row, "LANE", "PROCESS", "LOCAL", "REMOTE", "UP", "DOWN", "STATE", "BG CLASS", "DROPS", "WHY")
	for i := range flows {
		f := &flows[i]
		fmt.Fprintf(w, row, f.Lane, trunc(process(f), 18), trunc(f.Src, 23), trunc(f.Peers(), 23),
			FormatRate(f.UpBps), FormatRate(f.DownBps), f.State, class(f), fmt.Sprint(f.Drops), f.Why)
	}
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "~"
}
