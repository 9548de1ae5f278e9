// lberemote_udpfg_test.go: the steady foreground's kinds (--steady-fg)
// and the constant-rate UDP sender's pace on loopback (no root).
package lbe

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestParseSteadyFG(t *testing.T) {
	if got, err := parseSteadyFG("tcp, udp"); err != nil || !slices.Equal(got, []string{"tcp", "udp"}) {
		t.Errorf("tcp, udp: %v %v", got, err)
	}
	for _, bad := range []string{"", "quic", "tcp,cbr"} {
		if _, err := parseSteadyFG(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The sender keeps its rate: over 1 s at 200 KB/s (headers counted) the
// sink receives about 200 KB, loosely bounded (a loaded machine).
func TestSendCBRPace(t *testing.T) {
	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	const rate, size = 200_000, udpPayload
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	go sendCBR(ctx, pc, sink.LocalAddr(), rate, size)
	got := 0
	buf := make([]byte, 64<<10)
	_ = sink.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
	for {
		n, _, err := sink.ReadFrom(buf)
		if err != nil {
			break
		}
		got += n + udpOverhead
	}
	t.Logf("received %d bytes in 1 s at %d bytes/s (goal: %d)", got, rate, rate)
	if got < rate/2 || got > rate*3/2 {
		testutil.TimingErrorf(t, "received %d bytes in 1 s at %d bytes/s", got, rate)
	}
}
