// probe.go: the controller's delay signal, ICMP echo round trips to the
// class's peers on the interface (or a QUIC version probe to a peer's
// UDP port: quicprobe.go), one to each per step; a reader per socket
// matches the replies, so a peer that answers nothing costs the step no
// wait beyond its length. A target is an address and port: port 0 is the
// address's ICMP echo.
package bgudp

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

const (
	probeTimeout = time.Second
	probePayload = 8 // bytes after the ICMP header: the IPv4 packet is 36 bytes
)

// echo is one request in flight or answered.
type echo struct {
	peer     netip.AddrPort
	sent     time.Time
	answered time.Duration // its round trip, 0 while none
	taken    bool          // the step read it
}

// prober sends echo requests to peers and collects their replies.
type prober struct {
	id          int
	mu          sync.Mutex
	conns       map[bool]net.PacketConn // raw ICMP, by IPv6
	udps        map[bool]*net.UDPConn   // version probes, by IPv6
	own         ownSocket               // marks each socket the daemon's own
	released    []func()                // each socket's own mark's release
	seq         int
	out         map[int]*echo // by sequence number
	wake        chan struct{} // a reply came
	Sent        uint64
	VersionSent uint64 // of Sent, QUIC version probes
	Bytes       uint64 // sent and received, IP packets
}

// ownSocket marks a socket's packets as the daemon's own, not the
// foreground's (Datapath.OwnSocket); the returned func releases the mark.
type ownSocket func(c syscall.Conn) (func(), error)

func newProber(own ownSocket) *prober {
	return &prober{id: rand.IntN(0xffff), conns: map[bool]net.PacketConn{}, udps: map[bool]*net.UDPConn{}, out: map[int]*echo{}, wake: make(chan struct{}, 1), own: own}
}

// mark marks c the daemon's own (p.mu held); a refusal leaves its probes
// counted as foreground, as before the mark existed.
func (p *prober) mark(c syscall.Conn) {
	if p.own == nil {
		return
	}
	if release, err := p.own(c); err == nil {
		p.released = append(p.released, release)
	}
}

// conn is the family's socket, opened at its first use, with its reader.
func (p *prober) conn(v6 bool) (net.PacketConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[v6]; c != nil {
		return c, nil
	}
	network, addr, proto := "ip4:icmp", "0.0.0.0", 1
	if v6 {
		network, addr, proto = "ip6:ipv6-icmp", "::", 58
	}
	c, err := net.ListenPacket(network, addr) // a raw socket (icmp.ListenPacket's own), its cookie readable
	if err != nil {
		return nil, err
	}
	if sc, ok := c.(syscall.Conn); ok {
		p.mark(sc)
	}
	p.conns[v6] = c
	go p.read(c, proto)
	return c, nil
}

// send sends one probe to a target: an ICMP echo (port 0) or a version
// probe to the port.
func (p *prober) send(t netip.AddrPort) error {
	if t.Port() != 0 {
		return p.sendVN(t)
	}
	peer := t.Addr().Unmap()
	c, err := p.conn(peer.Is6())
	if err != nil {
		return err
	}
	var typ icmp.Type = ipv4.ICMPTypeEcho
	hdr := 20
	if peer.Is6() {
		typ, hdr = ipv6.ICMPTypeEchoRequest, 40
	}
	seq := p.next(netip.AddrPortFrom(peer, 0))
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: p.id, Seq: seq, Data: make([]byte, probePayload)}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.Bytes += uint64(hdr + len(b))
	p.mu.Unlock()
	_, err = c.WriteTo(b, &net.IPAddr{IP: peer.AsSlice()})
	return err
}

// next records a request to t in flight and returns its sequence number.
func (p *prober) next(t netip.AddrPort) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = (p.seq + 1) & 0xffff
	p.out[p.seq] = &echo{peer: t, sent: time.Now()}
	p.Sent++
	return p.seq
}

// answer records a reply to request seq, n bytes, come at at.
func (p *prober) answer(seq int, at time.Time, n int) {
	p.mu.Lock()
	if e := p.out[seq]; e != nil && e.answered == 0 {
		e.answered = max(at.Sub(e.sent), time.Nanosecond)
		p.Bytes += uint64(n)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// read matches replies to the requests in flight until the socket closes.
func (p *prober) read(c net.PacketConn, proto int) {
	_ = ownThreadAtStepNice() // the episode's step logs a refusal
	hdr := 20
	if proto == 58 {
		hdr = 40
	}
	buf := make([]byte, 1500)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		at := time.Now()
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
			continue
		}
		b, ok := m.Body.(*icmp.Echo)
		if !ok || b.ID != p.id {
			continue
		}
		p.answer(b.Seq, at, hdr+n)
	}
}

// peerResult is what a step learned of one peer.
type peerResult struct {
	rtt  time.Duration // its newest answer's round trip (0: none)
	age  time.Duration // how long before collect returned that answer's request left
	lost int           // requests past probeTimeout without an answer
}

// collect waits until every request sent since since has its answer or
// until deadline, and returns per peer the newest answer not yet read and
// the requests newly lost.
func (p *prober) collect(since, deadline time.Time) map[netip.AddrPort]peerResult {
	for !p.answeredSince(since) {
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-p.wake:
			t.Stop()
			continue
		case <-t.C:
		}
		break
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	res := map[netip.AddrPort]peerResult{}
	newest := map[netip.AddrPort]time.Time{}
	now := time.Now()
	for seq, e := range p.out {
		r := res[e.peer]
		switch {
		case e.answered != 0 && !e.taken:
			if e.sent.After(newest[e.peer]) {
				r.rtt, r.age, newest[e.peer] = e.answered, now.Sub(e.sent), e.sent
			}
			e.taken = true
		case e.answered == 0 && now.Sub(e.sent) > probeTimeout:
			r.lost++
		}
		res[e.peer] = r
		if e.answered != 0 || now.Sub(e.sent) > probeTimeout {
			delete(p.out, seq)
		}
	}
	return res
}

// answeredSince says whether every request sent at or after since has
// its answer.
func (p *prober) answeredSince(since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.out {
		if !e.sent.Before(since) && e.answered == 0 {
			return false
		}
	}
	return true
}

func (p *prober) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, release := range p.released {
		release()
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	for _, c := range p.udps {
		_ = c.Close()
	}
}
