package testbed

import (
	"testing"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// isReply takes the echo reply to its own id and sequence only, behind
// an IPv4 header of any length, as a raw socket reads it.
func TestICMPPingTakesItsOwnReply(t *testing.T) {
	packet := func(typ ipv4.ICMPType, id, seq, ihl int) []byte {
		b, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("lanes")}}).Marshal(nil)
		if err != nil {
			t.Fatal(err)
		}
		h := make([]byte, ihl*4)
		h[0] = 0x40 | byte(ihl)
		return append(h, b...)
	}
	for _, c := range []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"its reply", packet(ipv4.ICMPTypeEchoReply, 7, 3, 5), true},
		{"its reply, IP options", packet(ipv4.ICMPTypeEchoReply, 7, 3, 6), true},
		{"an earlier probe's", packet(ipv4.ICMPTypeEchoReply, 7, 2, 5), false},
		{"another pinger's", packet(ipv4.ICMPTypeEchoReply, 8, 3, 5), false},
		{"its own request", packet(ipv4.ICMPTypeEcho, 7, 3, 5), false},
		{"truncated", packet(ipv4.ICMPTypeEchoReply, 7, 3, 5)[:12], false},
	} {
		if got := isReply(c.pkt, 7, 3); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
