// lberemote_quic.go: QUIC as one of lbe-remote's background transports
// (--bg-transports ...,quic): the background flows (to bgsrv, bgsrv2) are
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

const quicPort = 4433

// startQUICServers runs quic-serve in the background servers where the
// bed's background is QUIC.
func (rb *remoteBed) startQUICServers(ctx context.Context) error {
	if rb.transport != TransportQUIC {
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

// quicBulkArgs is the quic-bulk helper's command line for a background
// flow in dir to server s.
func quicBulkArgs(dir string, s *topo.Node) []string {
	qdir := "up"
	if dir == "download" {
		qdir = "down"
	}
	return []string{"quic-bulk", "--to", fmt.Sprintf("%s:%d", s.Addr, quicPort), "--dir", qdir}
}
