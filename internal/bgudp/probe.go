// probe.go: the controller's delay signal, ICMP echo round trips to the
// background traffic's peer, one at a time (an echo not back within
// probeTimeout is lost).
package bgudp

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

const (
	probeTimeout = time.Second
	probePayload = 8 // bytes after the ICMP header: the IPv4 packet is 36 bytes
)

// prober sends echo requests to one peer and waits for each reply.
type prober struct {
	conn     *icmp.PacketConn
	peer     net.Addr
	v6       bool
	id, seq  int
	Sent     uint64
	Bytes    uint64 // sent and received, IP packets
	received uint64
}

func newProber(peer netip.Addr) (*prober, error) {
	peer = peer.Unmap()
	network, addr := "ip4:icmp", "0.0.0.0"
	if peer.Is6() {
		network, addr = "ip6:ipv6-icmp", "::"
	}
	c, err := icmp.ListenPacket(network, addr)
	if err != nil {
		return nil, err
	}
	return &prober{conn: c, peer: &net.IPAddr{IP: peer.AsSlice()}, v6: peer.Is6(), id: rand.IntN(0xffff)}, nil
}

// rtt sends one echo and returns its round trip (0: lost).
func (p *prober) rtt() (time.Duration, error) {
	p.seq = (p.seq + 1) & 0xffff
	var typ icmp.Type = ipv4.ICMPTypeEcho
	proto, hdr := 1, 20
	if p.v6 {
		typ, proto, hdr = ipv6.ICMPTypeEchoRequest, 58, 40
	}
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: p.id, Seq: p.seq, Data: make([]byte, probePayload)}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return 0, err
	}
	sent := time.Now()
	if _, err := p.conn.WriteTo(b, p.peer); err != nil {
		return 0, err
	}
	p.Sent++
	p.Bytes += uint64(hdr + len(b))
	buf := make([]byte, 1500)
	_ = p.conn.SetReadDeadline(sent.Add(probeTimeout))
	for {
		n, _, err := p.conn.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return 0, nil
			}
			return 0, err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == p.id && e.Seq == p.seq &&
			(m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply) {
			p.received++
			p.Bytes += uint64(hdr + n)
			return time.Since(sent), nil
		}
	}
}

func (p *prober) close() error { return p.conn.Close() }
