// lberemote_transport.go: the background's transport, an axis of
// lbe-remote (--bg-transports):
//   - tcp: HTTP over TCP; the socket keeps what the system gives it (the
//     host's congestion control, set before connect; lanes' sock_ops
//     switches a background socket to LEDBAT++ once established);
//   - tcp-app-cc: the same, but the application sets its own congestion
//     control (cubic) on its socket once connected, as iperf3 -C cubic
//     does; lanes' cgroup/setsockopt program keeps a background socket on
//     LEDBAT++, and the run records what the socket reported afterwards;
//   - quic: quic-go bulk streams with their own CUBIC (lberemote_quic.go).
//
// Every testbed of a round meets the same offsets into the links, whatever
// its transport: the no-background method runs once per (link, direction,
// round), as the paired base of every transport.
package lbe

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// Background transports of lbe-remote, in the order they are reported.
const (
	TransportTCP      = "tcp"
	TransportTCPAppCC = "tcp-app-cc"
	TransportQUIC     = "quic"
)

var remoteTransports = []string{TransportTCP, TransportTCPAppCC, TransportQUIC}

// appCC is the congestion control the tcp-app-cc background's application
// asks for (iperf3 -C cubic).
const appCC = "cubic"

// transportIndex orders transports as remoteTransports; "" (no background)
// first.
func transportIndex(t string) int {
	return slices.Index(remoteTransports, t)
}

// parseTransports reads --bg-transports: a comma-separated list of known
// transports, none twice, at least one.
func parseTransports(s string) ([]string, error) {
	var out []string
	for _, t := range splitList(s) {
		if transportIndex(t) < 0 {
			return nil, fmt.Errorf("bad background transport %q (tcp, tcp-app-cc or quic)", t)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("background transport %q given twice", t)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no background transport")
	}
	return out, nil
}

// remoteCase is one testbed's method and the background's transport ("" for
// the method without background).
type remoteCase struct {
	Method    RemoteMethod
	Transport string
}

// remoteCases is every testbed of a (round, link, direction): the method
// without background once, every other method once per transport.
func remoteCases(methods []RemoteMethod, transports []string) []remoteCase {
	var out []remoteCase
	for _, m := range methods {
		if !m.BG {
			out = append(out, remoteCase{Method: m})
			continue
		}
		for _, t := range transports {
			out = append(out, remoteCase{Method: m, Transport: t})
		}
	}
	return out
}

// bgHelperArgs is the helper and its arguments of a flow in dir to s: for a
// background flow over the bed's transport, else (the interactive bulk
// flow) the plain HTTP bulk upload or endless GET.
func (rb *remoteBed) bgHelperArgs(dir string, s *topo.Node, background bool) []string {
	if background && rb.transport == TransportQUIC {
		return quicBulkArgs(dir, s)
	}
	url := "http://" + s.Addr.String() + ":80"
	args := []string{"bulk", "--url", url}
	if dir == "download" {
		args = []string{"get", "--url", url, "--bytes", "100000000000", "--timeout", "1h"}
	}
	if background && rb.transport == TransportTCPAppCC {
		args = append(args, "--app-cc", appCC)
	}
	return args
}

// appSocketCC reads the line a tcp-app-cc background helper printed once
// connected: the congestion control its socket ran after the app's call.
func appSocketCC(ctx context.Context, p *topo.Proc) (string, error) {
	l, err := p.Line(ctx, 15*time.Second)
	if err != nil {
		return "", fmt.Errorf("background app's congestion control: %w", err)
	}
	var h testbed.BulkHello
	if err := json.Unmarshal([]byte(l), &h); err != nil || h.CC == "" {
		return "", fmt.Errorf("background app's congestion control: helper said %q", l)
	}
	return h.CC, nil
}
