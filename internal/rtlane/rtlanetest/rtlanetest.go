// Package rtlanetest starts a real realtime lane for tests of its clients
// (the Go client, the CLI): a lane in a fresh network namespace, its
// lanes-rtd built from rtd/ for the test, and a UDP receiver on that
// namespace's loopback, all stopped when the test ends.
package rtlanetest

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
	"github.com/lanes-net/lanes/internal/testutil"
)

// Start runs a lane at 100 Mbit/s and returns its socket path and a receiver
// (read timeout 500 ms).
func Start(t *testing.T) (socket string, rx *rtlane.Receiver) {
	t.Helper()
	socket, rx, _ = StartNS(t)
	return socket, rx
}

// StartNS is Start that also returns the lane's namespace, where a
// client's own sockets must be (rtclient's Attach).
func StartNS(t *testing.T) (socket string, rx *rtlane.Receiver, ns *testutil.NetNS) {
	t.Helper()
	ns = testutil.NewNetNS(t)
	cfg := config.DefaultRealtime()
	cfg.Enabled = true
	cfg.Socket = filepath.Join(t.TempDir(), "rt.sock")
	cfg.Rate = 100_000_000
	helper, err := rtdbuild.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var l *rtlane.Lane
	ns.Do(t, func() (err error) {
		if rx, err = rtlane.ListenReceiver(netip.MustParseAddrPort("127.0.0.1:0")); err != nil {
			return err
		}
		l, err = rtlane.New(cfg, rtlane.WithHelper(helper))
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; l.Close(); rx.Close() })
	rx.SetTimeout(500 * time.Millisecond)
	return cfg.Socket, rx, ns
}
