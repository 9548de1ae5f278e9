// quicprobe.go: the delay signal for a peer that answers no ICMP echo. A
// QUIC endpoint answers a client's long-header packet of a version it
// does not speak with a Version Negotiation packet (RFC 9000, 6.1; RFC
// 8999 makes that packet's form version-independent), so a 1200-byte
// datagram of a reserved version (0x?a?a?a?a) to the flow's own UDP port
// crosses the class's path and comes back like an echo. The reply
// carries the probe's connection IDs swapped: the probe's destination ID
// holds the prober's id and the sequence number.
package bgudp

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"
)

const (
	vnProbeSize    = 1200       // the smallest a server answers (RFC 9000, 14.1)
	vnProbeVersion = 0x1a2a3a4a // a reserved version: never spoken, always negotiated
	udpOverhead    = 28         // IPv4 and UDP headers
)

// udpConn is the family's UDP socket for version probes, opened at its
// first use, with its reader.
func (p *prober) udpConn(v6 bool) (*net.UDPConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.udps[v6]; c != nil {
		return c, nil
	}
	network := "udp4"
	if v6 {
		network = "udp6"
	}
	c, err := net.ListenUDP(network, nil)
	if err != nil {
		return nil, err
	}
	p.mark(c)
	p.udps[v6] = c
	go p.readVN(c)
	return c, nil
}

// sendVN sends one version probe to a peer's UDP port.
func (p *prober) sendVN(peer netip.AddrPort) error {
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	c, err := p.udpConn(peer.Addr().Is6())
	if err != nil {
		return err
	}
	seq := p.next(peer)
	b := make([]byte, vnProbeSize)
	b[0] = 0xc0 // long header, fixed bit, Initial
	binary.BigEndian.PutUint32(b[1:], vnProbeVersion)
	b[5] = 8 // destination connection ID: id, sequence, 4 random bytes
	binary.BigEndian.PutUint16(b[6:], uint16(p.id))
	binary.BigEndian.PutUint16(b[8:], uint16(seq))
	_, _ = rand.Read(b[10:14])
	b[14] = 8 // source connection ID: random
	_, _ = rand.Read(b[15:23])
	p.mu.Lock()
	p.VersionSent++
	p.Bytes += vnProbeSize + udpOverhead
	p.mu.Unlock()
	_, err = c.WriteToUDPAddrPort(b, peer)
	return err
}

// readVN matches Version Negotiation replies to the probes in flight
// until the socket closes.
func (p *prober) readVN(c *net.UDPConn) {
	buf := make([]byte, 1500)
	for {
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		at := time.Now()
		seq, ok := vnSeq(buf[:n], p.id)
		if !ok {
			continue
		}
		p.answer(seq, at, n+udpOverhead)
	}
}

// vnSeq is the sequence number a Version Negotiation packet answers (its
// source connection ID is the probe's destination ID).
func vnSeq(b []byte, id int) (int, bool) {
	if len(b) < 7 || b[0]&0x80 == 0 || binary.BigEndian.Uint32(b[1:]) != 0 {
		return 0, false
	}
	dl := int(b[5])
	if len(b) < 7+dl {
		return 0, false
	}
	sl := int(b[6+dl])
	scid := b[7+dl:]
	if sl != 8 || len(scid) < 8 || int(binary.BigEndian.Uint16(scid)) != id&0xffff {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(scid[2:])), true
}
