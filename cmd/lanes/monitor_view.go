// monitor_view.go: the live view of `lanes monitor`: on a terminal a
// screen redrawn in place at most 4 times a second, to a pipe plain tables
// one after the other; a summary line, the TCP flows by throughput (lane,
// process, cwnd, RTT, state, rate, coop caps), then the UDP flows.
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

// drawLive redraws the terminal (or, to a pipe, appends): a summary line,
// the TCP flows by throughput, then the UDP flows.
func drawLive(w io.Writer, s *tcpmon.Sampler, flows []tcpmon.Flow, top int, tty bool, udp *udpFlows) {
	var b strings.Builder
	if tty {
		b.WriteString("\x1b[H\x1b[2J")
	} else {
		b.WriteString("\n")
	}
	var total float64
	for i := range flows {
		total += flows[i].Throughput
	}
	backend, why := s.Backend()
	seen := fmt.Sprintf("%d sockets seen", s.Dumped)
	if backend == tcpmon.BackendTrack {
		seen = fmt.Sprintf("%d changed", s.Dumped)
	}
	fmt.Fprintf(&b, "lanes monitor  %s  every %v  %d flows (%s, %s)  total %s\n",
		time.Now().Format("15:04:05"), s.Interval(), len(flows), seen, backend, fmtRate(total))
	if backend == tcpmon.BackendTrack {
		fmt.Fprintf(&b, "(%s)\n", why) // how late an idle socket's change may show
	}
	b.WriteString("\n")
	writeFlowTable(&b, flows, top)
	writeUDPView(&b, udp)
	io.WriteString(w, b.String())
}

// writeFlowTable prints flows as an aligned table, at most top rows.
func writeFlowTable(w io.Writer, flows []tcpmon.Flow, top int) {
	const hdr = "%-11s %-18s %-23s %-23s %-10s %-22s %-8s %6s %6s %9s %9s %10s %7s %9s %9s  %s\n"
	fmt.Fprintf(w, hdr, "LANE", "PROCESS", "LOCAL", "REMOTE", "STATE", "CC", "CA", "CWND", "SSTHR", "RTT(ms)", "MINRTT", "RATE", "RETRANS", "SENDQ", "CAP", "WHY")
	for i := range flows {
		if top > 0 && i >= top {
			fmt.Fprintf(w, "... %d more\n", len(flows)-top)
			break
		}
		f := &flows[i]
		proc := "-"
		if f.PID != 0 {
			proc = fmt.Sprintf("%s/%d", f.Comm, f.PID)
		}
		lname := "-"
		if f.Lane != lane.Unset {
			lname = f.Lane.String()
		}
		ss := "-"
		if f.SSThresh != 0 && f.SSThresh < 0x7fffffff {
			ss = strconv.FormatUint(uint64(f.SSThresh), 10)
		}
		fmt.Fprintf(w, hdr, lname, trunc(proc, 18), trunc(f.Src, 23), trunc(f.Dst, 23), f.State, trunc(f.CongLabel(), 22), f.CAState,
			strconv.FormatUint(uint64(f.Cwnd), 10), ss,
			fmt.Sprintf("%.3f", float64(f.SRTT)/1000), fmt.Sprintf("%.3f", float64(f.MinRTT)/1000),
			fmtRate(f.Throughput), strconv.FormatUint(uint64(f.TotalRetrans), 10), strconv.FormatUint(uint64(f.SendQ), 10), capsText(f), f.Why)
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
func fmtRate(bps float64) string {
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
