// udpbytes.go: each local UDP port's bytes sent and received on the
// managed interfaces (the classifier's lanes_udp_bytes: its datagrams
// leaving, counted by the classifier, and arriving for this host, by the
// ingress program), from which the views compute UDP (QUIC) rates.
package datapath

import (
	"fmt"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
)

// UDPBytes is one local UDP port's byte counts since the datapath was
// installed (or since the port's entry was made again).
type UDPBytes struct {
	Sent, Received uint64
}

// UDPPortBytes reads every counted local UDP port's bytes; nil without the
// counting map (the Android form's pinned classifier).
func (m *LaneMaps) UDPPortBytes() (map[uint16]UDPBytes, error) {
	out := map[uint16]UDPBytes{}
	err := m.guard.use(func() error {
		if m.cls.LanesUdpBytes == nil {
			out = nil
			return nil
		}
		var (
			port uint32
			v    classifier.ClassifierUdpBytes
		)
		it := m.cls.LanesUdpBytes.Iterate()
		for it.Next(&port, &v) {
			out[uint16(port)] = UDPBytes{Sent: v.Tx, Received: v.Rx}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("UDP byte counts: %w", err)
		}
		return nil
	})
	return out, err
}
