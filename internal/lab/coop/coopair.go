// coopair.go: each host's share of the shared medium as the AP delivers it.
//
// The coop experiments count goodput where the application reads it (the
// server's reader of an upload, the host's reader of a download). Over a
// 200 ms step that count carries the readers' wake-ups and the recorder's
// own timing: in lab runs on a 2-core machine at load 15-28 a host
// above the step's mean was below it in the next step (lag-1
// autocorrelation of the per-host deviations -0.25 to -0.47 for lanes), and
// Jain's index over 400 ms was 0.99-1.00 where over 200 ms it was
// 0.97-0.98: bytes counted in the wrong step, not a host getting less.
//
// So the bed also counts, per host, the TCP payload bytes of its transfers
// leaving the shared medium (uploads: the shared uplink's exit, packets from
// the host; downloads: the shared downlink's exit, packets to the host),
// from the emulator's link goroutine as each packet is delivered: the air
// each host got, retransmissions included, independent of the readers and
// of the recorder. The recorder snapshots every host's counters at one
// instant (record), so a slow host sample cannot move bytes between steps.
package coop

import (
	"encoding/binary"
	"net/netip"
)

// tcpPayload returns an IPv4 TCP packet's addresses and payload length
// (ok false: not IPv4 TCP, or truncated).
func tcpPayload(b []byte) (src, dst netip.Addr, n int, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 || b[9] != 6 {
		return src, dst, 0, false
	}
	ihl := int(b[0]&0xf) * 4
	if ihl < 20 || len(b) < ihl+20 {
		return src, dst, 0, false
	}
	tot := int(binary.BigEndian.Uint16(b[2:]))
	doff := int(b[ihl+12]>>4) * 4
	n = tot - ihl - doff
	if n < 0 {
		n = 0
	}
	src = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	dst = netip.AddrFrom4([4]byte{b[16], b[17], b[18], b[19]})
	return src, dst, n, true
}

// isTCP4 reports whether b is an IPv4 TCP packet.
func isTCP4(b []byte) bool { return len(b) >= 20 && b[0]>>4 == 4 && b[9] == 6 }

// ipv4Addrs returns an IPv4 packet's source and destination (ok false: not
// IPv4 or truncated).
func ipv4Addrs(b []byte) (src, dst netip.Addr, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return src, dst, false
	}
	return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), netip.AddrFrom4([4]byte{b[16], b[17], b[18], b[19]}), true
}

// meterAir counts each host's TCP payload leaving the shared medium in
// the bed's direction (coopHost.air), and every other packet the medium
// carried in that direction (cb.other, whole packets: the daemons'
// announcements, IPv4 or IPv6). Call before the emulator starts.
func (cb *coopBed) meterAir() {
	if cb.cfg.Down {
		cb.bed.Emu.OnDown = func(b []byte) {
			if !isTCP4(b) {
				if _, dst, ok := ipv4Addrs(b); !ok || dst != cb.server.Addr {
					cb.other.Add(int64(len(b)))
				}
				return
			}
			src, dst, n, ok := tcpPayload(b)
			if !ok || n == 0 || src != cb.server.Addr {
				return
			}
			if h := cb.byAddr[dst]; h != nil {
				h.air.Add(int64(n))
			}
		}
		return
	}
	cb.bed.Emu.OnUp = func(b []byte) {
		if !isTCP4(b) {
			if src, _, ok := ipv4Addrs(b); !ok || src != cb.server.Addr {
				cb.other.Add(int64(len(b)))
			}
			return
		}
		src, dst, n, ok := tcpPayload(b)
		if !ok || n == 0 || dst != cb.server.Addr {
			return
		}
		if h := cb.byAddr[src]; h != nil {
			h.air.Add(int64(n))
		}
	}
}
