// monitor_events.go: `lanes monitor --events`: flow start and end traced
// by BPF on sock:inet_sock_set_state and, with --probe, every ACK's cwnd,
// ssthresh and srtt (tcp:tcp_probe), as text lines or JSON lines.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/lanes-net/lanes/internal/tcpmon"
)

// runEvents is event mode: flow start/end (and per-ACK probes with --probe)
// as text lines or, with --json, JSON lines.
func runEvents(ctx context.Context, e *env, m *monitorFlags) error {
	if m.netns != "" {
		fmt.Fprintln(e.stderr, "lanes monitor: note: tracepoints see every namespace; filter with --port")
	}
	cfg := tcpmon.EventConfig{State: true, Probe: m.probe, ProbeGap: m.probeGap, AllSegments: m.allSegments, MaxDelay: m.maxDelay}
	for _, p := range []uint{m.port, m.sport, m.dport} {
		if p != 0 {
			cfg.Ports = append(cfg.Ports, uint16(p))
		}
	}
	tr, err := tcpmon.OpenTracer(cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	out := e.stdout
	if m.output != "" {
		f, err := os.Create(m.output)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		defer f.Close()
		out = f
	}
	enc := json.NewEncoder(out)
	if !m.json {
		fmt.Fprintf(out, "%-15s %-5s %-23s %-23s %s\n", "TIME", "EVENT", "LOCAL", "REMOTE", "DETAILS")
	}
	n := 0
	for {
		ev, err := tr.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				st := tr.Stats()
				if st.Dropped > 0 {
					fmt.Fprintf(e.stderr, "lanes monitor: %d events dropped (ring buffer full)\n", st.Dropped)
				}
				return nil
			}
			return err
		}
		if m.json {
			if err := enc.Encode(&ev); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(out, "%-15s %-5s %-23s %-23s %s\n", ev.Time.Format("15:04:05.000000"), ev.Kind, ev.Src, ev.Dst, eventDetails(&ev))
		}
		n++
		if m.count > 0 && n >= m.count {
			return nil
		}
	}
}

func eventDetails(ev *tcpmon.Event) string {
	switch ev.Kind {
	case "probe":
		return fmt.Sprintf("cwnd %d ssthresh %d srtt %.3fms snd_wnd %d", ev.Cwnd, ev.SSThresh, float64(ev.SRTT)/1000, ev.SndWnd)
	case "start":
		return fmt.Sprintf("%s->%s handshake %v %s", ev.OldState, ev.NewState, ev.Duration, procName(ev))
	case "end":
		return fmt.Sprintf("%s->%s duration %v %s", ev.OldState, ev.NewState, ev.Duration, procName(ev))
	}
	return ""
}

func procName(ev *tcpmon.Event) string {
	if ev.PID == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%d", ev.Comm, ev.PID)
}
