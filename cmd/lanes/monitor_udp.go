// monitor_udp.go: the UDP flows (QUIC included) in `lanes monitor`: asked
// of the daemon (udp-flows: every UDP socket of its namespace and the
// background class's 5-tuples, with lane and why; rates up and down from
// two answers' byte counts) at most once a second,
// written as JSON records with "proto":"udp" beside the TCP flows' and
// listed under them in the live view.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// udpAskEvery is how often the monitor asks the daemon for UDP flows.
const udpAskEvery = time.Second

// udpFlows keeps the daemon's last answer.
type udpFlows struct {
	client *client.Client
	filter udpFilter
	at     time.Time
	flows  []udpflow.Flow
	more   int
	err    error
}

// udpFilter is the part of the monitor's filters that a UDP flow has.
type udpFilter struct {
	lanes              []lane.Lane
	local, remote      netip.Prefix
	sport, dport, port uint16
	pid                int
	comm               string
}

// get returns the flows, asking the daemon again when the answer is older
// than udpAskEvery.
func (u *udpFlows) get(now time.Time) []udpflow.Flow {
	if u.client == nil || now.Sub(u.at) < udpAskEvery {
		return u.flows
	}
	u.at = now
	flows, more, err := u.client.UDPFlows()
	if err != nil {
		u.err = err
		return u.flows
	}
	udpflow.FillOwners(flows, "/proc")
	udpflow.FillRates(u.flows, flows) // the rates since the last answer
	u.flows, u.more, u.err = slices.DeleteFunc(flows, func(f udpflow.Flow) bool { return !u.filter.match(&f) }), more, nil
	return u.flows
}

func (m udpFilter) match(f *udpflow.Flow) bool {
	src, _ := netip.ParseAddrPort(f.Src)
	dsts := []string{f.Dst}
	if !f.Connected() && len(f.Remotes) > 0 {
		dsts = f.Remotes
	}
	remoteOK, dportOK, portOK := !m.remote.IsValid(), m.dport == 0, m.port == 0 || src.Port() == m.port
	for _, d := range dsts {
		ap, err := netip.ParseAddrPort(d)
		if err != nil {
			continue
		}
		remoteOK = remoteOK || m.remote.Contains(ap.Addr())
		dportOK = dportOK || ap.Port() == m.dport
		portOK = portOK || ap.Port() == m.port
	}
	return remoteOK && dportOK && portOK &&
		(len(m.lanes) == 0 || slices.Contains(m.lanes, f.Lane)) &&
		(!m.local.IsValid() || m.local.Contains(src.Addr())) &&
		(m.sport == 0 || src.Port() == m.sport) &&
		(m.pid == 0 || f.PID == m.pid) && (m.comm == "" || f.Comm == m.comm)
}

// udpJSON is one UDP flow's JSON line: the sample time, then the flow.
type udpJSON struct {
	Time time.Time `json:"time"`
	udpflow.Flow
}

// writeUDPJSON writes one JSON line per UDP flow.
func writeUDPJSON(w io.Writer, t time.Time, flows []udpflow.Flow) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for i := range flows {
		if err := enc.Encode(udpJSON{Time: t, Flow: flows[i]}); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeUDPView is the live view's UDP part.
func writeUDPView(w io.Writer, u *udpFlows, verbose bool) {
	if u.client == nil {
		return
	}
	flows := u.flows
	if !verbose {
		flows = slices.DeleteFunc(slices.Clone(flows), func(f udpflow.Flow) bool { return f.Daemon })
	}
	fmt.Fprintf(w, "\nUDP flows (QUIC included): %d", len(flows))
	if u.more > 0 {
		fmt.Fprintf(w, " (and %d more the daemon left out)", u.more)
	}
	if u.err != nil {
		fmt.Fprintf(w, " (daemon: %v)", u.err)
	}
	io.WriteString(w, "\n")
	switch {
	case len(flows) == 0:
	case verbose:
		udpflow.WriteTable(w, flows)
	default:
		udpflow.WriteBrief(w, flows, outputWidth)
	}
}
