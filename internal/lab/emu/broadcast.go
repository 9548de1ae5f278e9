// broadcast.go: link-local broadcast and multicast on a shared medium, as
// a Wi-Fi access point relays them.
//
//	sender --[shared uplink, once]--> AP --[each shared downlink, once]--> every other host on it
//
// A station's IPv4 limited broadcast (255.255.255.255: the lab's hosts have
// /32 addresses, so that is what their sockets send to) or IPv6 link-local
// multicast (ff02::/16) costs the medium one frame up and one frame down,
// however many stations hear it (an AP without client isolation; no
// multicast-to-unicast conversion). Hosts on a link of their own (a wired
// server) neither send into nor hear the medium's broadcasts.
package emu

import "net/netip"

// isLinkBroadcast reports whether b is an IPv4 packet to 255.255.255.255
// or an IPv6 packet to a link-local multicast group.
func isLinkBroadcast(b []byte) bool {
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		return b[16] == 255 && b[17] == 255 && b[18] == 255 && b[19] == 255
	case len(b) >= 40 && b[0]>>4 == 6:
		return b[24] == 0xff && b[25]&0x0f == 2
	}
	return false
}

// sender is the host a broadcast came from: the one whose TUN it was read
// from (meta), else the owner of its IPv4 source (a prioritiser's
// packets); nil if neither.
func (e *Emulator) sender(b []byte, meta any) *Host {
	if h, ok := meta.(*Host); ok {
		return h
	}
	if b[0]>>4 != 4 {
		return nil
	}
	src := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.byAddr[src]
}

// relayBroadcast is the AP's side: a broadcast that left uplink up goes
// once down every downlink of the hosts sharing that uplink, tagged with
// its sender (who must not hear it back).
func (e *Emulator) relayBroadcast(up *Link, b []byte, meta any) {
	from := e.sender(b, meta)
	if from == nil || from.Up != up {
		e.NoRoute.Add(1)
		return
	}
	e.mu.RLock()
	var downs []*Link
	for _, h := range e.hosts {
		if h.Up == up && !containsLink(downs, h.Down) {
			downs = append(downs, h.Down)
		}
	}
	e.mu.RUnlock()
	for _, d := range downs {
		e.Broadcast.Add(1)
		d.Enqueue(b, from)
	}
}

// deliverBroadcast writes a broadcast that left downlink down to every host
// behind it except its sender.
func (e *Emulator) deliverBroadcast(down *Link, b []byte, meta any) {
	from, _ := meta.(*Host)
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, h := range e.hosts {
		if h.Down == down && h != from {
			_, _ = h.tun.Write(b)
		}
	}
}

func containsLink(ls []*Link, l *Link) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}
