// monitor_view.go: the live view of `lanes monitor`: on a terminal a
// screen redrawn in place at most 4 times a second, to a pipe plain tables
// one after the other; a summary line, the TCP flows by rate (lane,
// process, RTT, rates up and down, why; -v: cwnd, state, coop caps...),
// then the UDP flows. Without -v every line fits 100 columns.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// isTerminal tells whether w is a terminal; elsewhere (pipes, files) the
// live view prints plain tables one after the other, without ANSI codes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// redrawEvery: a terminal is redrawn at most 4 times a second, a pipe gets
// one table a second, however fast we sample.
func redrawEvery(w io.Writer) time.Duration {
	if isTerminal(w) {
		return 250 * time.Millisecond
	}
	return time.Second
}

// liveView is how the live view draws: on a terminal (redrawn in place)
// or not, every column (-v) or 100 columns, at most top flows; noted: the
// sampler's note was printed (a pipe gets it once).
type liveView struct {
	tty, verbose, noted bool
	top                 int
}

// drawLive redraws the terminal (or, to a pipe, appends): a summary line,
// the TCP flows by rate (sent and received), then the UDP flows.
func (v *liveView) drawLive(w io.Writer, s *tcpmon.Sampler, flows []tcpmon.Flow, udp *udpFlows) {
	var b strings.Builder
	if v.tty {
		b.WriteString("\x1b[H\x1b[2J")
	} else {
		b.WriteString("\n")
	}
	var up, down float64
	for i := range flows {
		up += flows[i].Throughput
		down += flows[i].RecvRate
	}
	backend, why := s.Backend()
	seen := fmt.Sprintf("%d sockets seen", s.Dumped)
	if backend == tcpmon.BackendTrack {
		seen = fmt.Sprintf("%d changed", s.Dumped)
	}
	fmt.Fprintf(&b, "lanes monitor  %s  every %v  %d flows (%s, %s)  up %s  down %s\n",
		time.Now().Format("15:04:05"), s.Interval(), len(flows), seen, backend, fmtRate(up), fmtRate(down))
	if backend == tcpmon.BackendTrack && (v.tty || v.verbose || !v.noted) {
		// how late an idle socket's change may show: once to a pipe
		fmt.Fprintf(&b, "note: %s\n", why)
		v.noted = true
	}
	b.WriteString("\n")
	if v.verbose {
		writeFlowTable(&b, flows, v.top)
	} else {
		writeBriefFlows(&b, flows, v.top)
	}
	writeUDPView(&b, udp, v.verbose)
	if v.verbose {
		io.WriteString(w, b.String())
		return
	}
	fw := newFitWriter(w)
	io.WriteString(fw, b.String())
	fw.Close()
}

// writeBriefFlows prints flows in 100 columns: lane, process, remote, RTT,
// the rates up (acknowledged) and down (received), why; at most top rows.
func writeBriefFlows(w io.Writer, flows []tcpmon.Flow, top int) {
	const row = "%-11s %-14s %-21s %7s %9s %9s %s\n"
	fmt.Fprintf(w, row, "LANE", "PROCESS", "REMOTE", "RTT(ms)", "UP", "DOWN", "WHY")
	for i := range flows {
		if top > 0 && i >= top {
			fmt.Fprintf(w, "... %d more\n", len(flows)-top)
			break
		}
		f := &flows[i]
		fmt.Fprintf(w, row, laneName(f.Lane), trunc(flowProc(f), 14), trunc(f.Dst, 21), fmt.Sprintf("%.1f", float64(f.SRTT)/1000),
			fmtRate(f.Throughput), fmtRate(f.RecvRate), f.Why)
	}
}

// flowProc is a flow's process as "comm/pid", or "-".
func flowProc(f *tcpmon.Flow) string {
	if f.PID == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%d", f.Comm, f.PID)
}

// laneName is a lane for the tables, "-" where unset.
func laneName(l lane.Lane) string {
	if l == lane.Unset {
		return "-"
	}
	return l.String()
}

// writeFlowTable prints flows with every column, at most top rows.
func writeFlowTable(w io.Writer, flows []tcpmon.Flow, top int) {
	const hdr = "%-11s %-18s %-23s %-23s %-10s %-22s %-8s %6s %6s %9s %9s %10s %10s %7s %9s %9s  %s\n"
	fmt.Fprintf(w, hdr, "LANE", "PROCESS", "LOCAL", "REMOTE", "STATE", "CC", "CA", "CWND", "SSTHR", "RTT(ms)", "MINRTT", "UP", "DOWN", "RETRANS", "SENDQ", "CAP", "WHY")
	for i := range flows {
		if top > 0 && i >= top {
			fmt.Fprintf(w, "... %d more\n", len(flows)-top)
			break
		}
		f := &flows[i]
		ss := "-"
		if f.SSThresh != 0 && f.SSThresh < 0x7fffffff {
			ss = strconv.FormatUint(uint64(f.SSThresh), 10)
		}
		fmt.Fprintf(w, hdr, laneName(f.Lane), trunc(flowProc(f), 18), trunc(f.Src, 23), trunc(f.Dst, 23), f.State, trunc(f.CongLabel(), 22), f.CAState,
			strconv.FormatUint(uint64(f.Cwnd), 10), ss,
			fmt.Sprintf("%.3f", float64(f.SRTT)/1000), fmt.Sprintf("%.3f", float64(f.MinRTT)/1000),
			fmtRate(f.Throughput), fmtRate(f.RecvRate), strconv.FormatUint(uint64(f.TotalRetrans), 10), strconv.FormatUint(uint64(f.SendQ), 10), capsText(f), f.Why)
	}
}

// capsText is a flow's coop caps for the table: the cwnd cap in segments,
// a downlink cap as "rwnd:N" bytes, "-" for none.
func capsText(f *tcpmon.Flow) string {
	switch {
	case f.CwndCap != 0 && f.RwndCap != 0:
		return fmt.Sprintf("%d/%dB", f.CwndCap, f.RwndCap)
	case f.RwndCap != 0:
		return fmt.Sprintf("rwnd:%d", f.RwndCap)
	case f.CwndCap != 0:
		return strconv.FormatUint(uint64(f.CwndCap), 10)
	}
	return "-"
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "~"
}

// fmtRate prints bits/s the way tc and ss do.
func fmtRate(bps float64) string { return udpflow.FormatRate(bps) }
