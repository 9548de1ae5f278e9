// lberemote_udpfg.go: the steady step's foreground kinds (--steady-fg):
// a TCP stream paced by the kernel, or a constant-rate UDP stream (a
// call, a game, a video conference) sent by the helper udp-cbr at the
// same rate into a udp-sink on the other end, in the background's
// direction: from the phone to fgsrv for an upload, from fgsrv to the
// phone for a download.
package lbe

import (
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// The steady foreground's kinds.
const (
	SteadyTCP = "tcp" // a TCP stream paced by SO_MAX_PACING_RATE
	SteadyUDP = "udp" // a constant-rate UDP stream
)

// steadyUDPPort is the UDP sink's port (discard).
const steadyUDPPort = "9"

// udpPayload is the UDP stream's datagram payload, bytes; udpOverhead its
// IPv4 and UDP headers, counted in the pace.
const (
	udpPayload  = 1200
	udpOverhead = 28
)

func init() {
	testbed.RegisterHelper("udp-cbr", helperUDPCBR)
	testbed.RegisterHelper("udp-sink", helperUDPSink)
}

// parseSteadyFG parses --steady-fg: kinds of steadyKindsAll, in order.
func parseSteadyFG(s string) ([]string, error) {
	kinds := splitList(s)
	for _, k := range kinds {
		if !slices.Contains(steadyKindsAll, k) {
			return nil, fmt.Errorf("bad steady foreground %q (one of %s)", k, strings.Join(steadyKindsAll, ", "))
		}
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("no steady foreground")
	}
	return kinds, nil
}

// startSteadyFG starts the steady foreground of kind in dir, rate bytes/s;
// stop ends it (its processes and, for TCP, its sockets; the bursty kinds:
// lberemote_fgkinds.go, their figures into s).
func (rb *remoteBed) startSteadyFG(ctx context.Context, kind, dir string, rate int, s *RemoteSteady) (stop func(), err error) {
	if kind != SteadyTCP && kind != SteadyUDP {
		return rb.startBurstyFG(ctx, kind, dir, rate, s)
	}
	if kind != SteadyUDP {
		fg, err := rb.phone.Start(steadyArgs(dir, rb.fg, rate)...)
		if err != nil {
			return nil, err
		}
		return func() { rb.endBulk(fg) }, nil
	}
	from, to := rb.phone, rb.fg
	if dir == "download" {
		from, to = rb.fg, rb.phone
	}
	sink, err := to.Start("udp-sink", "--listen", ":"+steadyUDPPort)
	if err != nil {
		return nil, err
	}
	if l, err := sink.Line(ctx, 15*time.Second); err != nil || l != "ready" {
		sink.Kill()
		return nil, fmt.Errorf("udp sink in %s: %q %v", to.Name, l, err)
	}
	cbr, err := from.Start(udpCBRArgs(to, rate)...)
	if err != nil {
		sink.Kill()
		return nil, err
	}
	return func() { cbr.Kill(); sink.Kill() }, nil
}

// udpCBRArgs is the helper sending the constant-rate UDP stream to node
// to's sink at rate bytes/s.
func udpCBRArgs(to *topo.Node, rate int) []string {
	return []string{"udp-cbr", "--to", net.JoinHostPort(to.Addr.String(), steadyUDPPort), "--rate", strconv.Itoa(rate)}
}

// helperUDPCBR sends datagrams to --to at --rate bytes/s (headers
// included) until killed, catching up every millisecond on what the clock allows, so
// that a late wake-up sends a short burst instead of lowering the rate.
func helperUDPCBR(args []string) error {
	fs := flag.NewFlagSet("udp-cbr", flag.ContinueOnError)
	to := fs.String("to", "", "UDP IP:PORT")
	rate := fs.Int("rate", 0, "bytes/s, headers included")
	size := fs.Int("size", udpPayload, "payload bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rate <= 0 || *size <= 0 {
		return fmt.Errorf("want --rate and --size > 0")
	}
	dst, err := net.ResolveUDPAddr("udp", *to)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", ":0")
	if err != nil {
		return err
	}
	defer pc.Close()
	sendCBR(context.Background(), pc, dst, *rate, *size)
	return nil
}

// sendCBR sends datagrams of size bytes to dst on pc at rate bytes/s
// (headers included) until ctx ends.
func sendCBR(ctx context.Context, pc net.PacketConn, dst net.Addr, rate, size int) {
	p := make([]byte, size)
	wire := float64(size + udpOverhead)
	start := time.Now()
	for sent := 0.0; ctx.Err() == nil; time.Sleep(time.Millisecond) {
		for due := time.Since(start).Seconds() * float64(rate); sent+wire <= due; sent += wire {
			_, _ = pc.WriteTo(p, dst) // a full socket buffer drops, as a call's would
		}
	}
}

// helperUDPSink reads and drops datagrams on --listen.
func helperUDPSink(args []string) error {
	fs := flag.NewFlagSet("udp-sink", flag.ContinueOnError)
	listen := fs.String("listen", ":"+steadyUDPPort, "UDP listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", *listen)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	buf := make([]byte, 64<<10)
	for {
		if _, _, err := pc.ReadFrom(buf); err != nil {
			return err
		}
	}
}
