// classifier.go loads the lanes egress classifier: it sets the program's
// constants (link-layer header length, HTB class minor base) and builds the
// map keys the program looks up. Attaching it is the datapath's job.
package classifier

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/lane"
)

// Kind says how the classifier found a packet's lane; it indexes the counters.
type Kind uint32

const (
	KindCookie  Kind = 0
	KindTuple   Kind = 1
	KindCgroup  Kind = 2
	KindUID     Kind = 3
	KindDSCP    Kind = 4
	KindDefault Kind = 5
	NumKinds         = 6
)

var kindNames = [NumKinds]string{"cookie", "tuple", "cgroup", "uid", "dscp", "default"}

func (k Kind) String() string {
	if int(k) < NumKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", uint32(k))
}

// Config is what the program needs to know about the device it runs on.
type Config struct {
	// L2Len is the number of bytes before the IP header: 14 on Ethernet
	// (and veth), 0 on raw-IP devices such as TUN or WireGuard.
	L2Len uint32
}

// Load loads the classifier and its maps into the kernel, unattached.
func Load(cfg Config) (*ClassifierObjects, error) {
	spec, err := LoadClassifier()
	if err != nil {
		return nil, err
	}
	c := ClassifierClsConfig{L2Len: cfg.L2Len, MinorBase: lane.ClassMinor}
	if err := spec.Variables[ClassifierVarCFG].Set(c); err != nil {
		return nil, fmt.Errorf("set classifier config: %w", err)
	}
	var objs ClassifierObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load classifier: %w", err)
	}
	return &objs, nil
}

// StatsIndex is the key of the (kind, lane) counter in lanes_cls_stats.
func StatsIndex(k Kind, l lane.Lane) uint32 { return uint32(k)*4 + uint32(l) }

// FlowKey builds the lanes_tuple key of the paper's 3-tuple: destination
// address and port and source port as the sender sees them; proto 0 matches
// any protocol. IPv4 addresses are stored v4-mapped.
func FlowKey(dst netip.Addr, dport, sport uint16, proto uint8) ClassifierFlowKey {
	return ClassifierFlowKey{Daddr: dst.As16(), Dport: dport, Sport: sport, Proto: proto}
}

// Addr returns the key's destination address, unmapped if it is IPv4.
func (k ClassifierFlowKey) Addr() netip.Addr {
	return netip.AddrFrom16(k.Daddr).Unmap()
}

// SumCounters adds up a per-CPU counter.
func SumCounters(per []ClassifierCounter) ClassifierCounter {
	var s ClassifierCounter
	for _, c := range per {
		s.Packets += c.Packets
		s.Bytes += c.Bytes
	}
	return s
}

// ReadStats returns the summed counters indexed by StatsIndex.
func ReadStats(m *ebpf.Map) ([NumKinds * 4]ClassifierCounter, error) {
	var out [NumKinds * 4]ClassifierCounter
	for i := range out {
		var per []ClassifierCounter
		if err := m.Lookup(uint32(i), &per); err != nil {
			return out, fmt.Errorf("read classifier counter %d: %w", i, err)
		}
		out[i] = SumCounters(per)
	}
	return out, nil
}
