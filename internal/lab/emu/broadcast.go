// broadcast.go: IPv4 limited broadcast on a shared medium, as a Wi-Fi
// access point relays it.
//
//	sender --[shared uplink, once]--> AP --[each shared downlink, once]--> every other host on it
//
// A station's broadcast costs the medium one frame up and one frame down,
// however many stations hear it (an AP without client isolation). Hosts on
// a link of their own (a wired server) neither send into nor hear the
// medium's broadcasts. Only 255.255.255.255 is a broadcast here: the lab's
// hosts have /32 addresses, so that is what their sockets send to.
package emu

import "net/netip"

// isBroadcast4 reports whether b is an IPv4 packet to 255.255.255.255.
func isBroadcast4(b []byte) bool {
	return len(b) >= 20 && b[0]>>4 == 4 && b[16] == 255 && b[17] == 255 && b[18] == 255 && b[19] == 255
}

// sender returns the host whose address is b's IPv4 source (nil: none).
func (e *Emulator) sender(b []byte) *Host {
	src := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.byAddr[src]
}

// relayBroadcast is the AP's side: a broadcast that left uplink up goes
// once down every downlink of the hosts sharing that uplink, tagged with
// its sender (who must not hear it back).
func (e *Emulator) relayBroadcast(up *Link, b []byte) {
	from := e.sender(b)
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
