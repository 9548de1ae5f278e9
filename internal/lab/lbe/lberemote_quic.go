// lberemote_quic.go: QUIC as lbe-remote's background transport
// (--bg-transport quic): the background flows (to bgsrv, bgsrv2) are
// quic-go bulk streams with quic-go's own congestion control instead of
// HTTP over TCP; the foreground transfers and the interactive bulk flow
// stay TCP. Each server runs quic-serve on UDP :4433 beside its HTTP
// server.
package lbe

import (
	"context"
	"fmt"
	"time"

	"github.com/lanes-net/lanes/internal/lab/topo"
)

// Background transports of lbe-remote.
const (
	TransportTCP  = "tcp"
	TransportQUIC = "quic"
)

const quicPort = 4433

// startQUICServers runs quic-serve in the background servers where the
// background is QUIC.
func (rb *remoteBed) startQUICServers(ctx context.Context) error {
	if rb.cfg.BGTransport != TransportQUIC {
		return nil
	}
	for _, s := range []*topo.Node{rb.bg, rb.bg2} {
		p, err := s.Start("quic-serve", "--listen", fmt.Sprintf(":%d", quicPort))
		if err != nil {
			return err
		}
		if l, err := p.Line(ctx, 15*time.Second); err != nil || l != "ready" {
			return fmt.Errorf("QUIC server in %s: %q %v", s.Name, l, err)
		}
	}
	return nil
}

// bgHelperArgs is the helper and its arguments of a background flow in dir
// to s: the HTTP bulk upload or endless GET, or a QUIC bulk stream.
func (rb *remoteBed) bgHelperArgs(dir string, s *topo.Node, background bool) []string {
	if background && rb.cfg.BGTransport == TransportQUIC {
		qdir := "up"
		if dir == "download" {
			qdir = "down"
		}
		return []string{"quic-bulk", "--to", fmt.Sprintf("%s:%d", s.Addr, quicPort), "--dir", qdir}
	}
	url := "http://" + s.Addr.String() + ":80"
	if dir == "download" {
		return []string{"get", "--url", url, "--bytes", "100000000000", "--timeout", "1h"}
	}
	return []string{"bulk", "--url", url}
}

// checkTransport validates --bg-transport.
func checkTransport(t string) error {
	if t != TransportTCP && t != TransportQUIC {
		return fmt.Errorf("bad background transport %q (tcp or quic)", t)
	}
	return nil
}
