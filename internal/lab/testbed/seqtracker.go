// seqtracker.go: counting a TCP flow's goodput from the sequence numbers
// of the packets a link carries (the accuracy checks and the shared-medium
// tests measure with it).
package testbed

import (
	"encoding/binary"
	"net/netip"
	"sync"
)

// SeqTracker follows the highest TCP sequence end of packets sent from src
// to dport (in-order bytes delivered, as the receiver sees them).
type SeqTracker struct {
	Src   netip.Addr
	Dport uint16
	mu    sync.Mutex
	base  uint32
	have  bool
	high  int64
}

func (s *SeqTracker) See(b []byte) {
	if len(b) < 40 || b[0]>>4 != 4 || b[9] != 6 {
		return
	}
	if netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}) != s.Src {
		return
	}
	ihl := int(b[0]&0xf) * 4
	if len(b) < ihl+20 || binary.BigEndian.Uint16(b[ihl+2:]) != s.Dport {
		return
	}
	tot := int(binary.BigEndian.Uint16(b[2:]))
	doff := int(b[ihl+12]>>4) * 4
	payload := tot - ihl - doff
	seq := binary.BigEndian.Uint32(b[ihl+4:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.have {
		s.base, s.have = seq, true
	}
	end := int64(int32(seq-s.base)) + int64(payload)
	if end > s.high {
		s.high = end
	}
}

func (s *SeqTracker) Value() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.high
}
