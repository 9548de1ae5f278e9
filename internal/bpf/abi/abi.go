// abi.go gives the generated ABI types short names and reads the names of
// the header's enums from the embedded BTF, so a counter or match kind added
// to lanes_abi.h shows up in Go (status, monitor) without a Go edit.
package abi

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// The shared map structs, as the programs lay them out.
type (
	FlowKey = AbiFlowKey
	DstKey  = AbiDstKey
	Counter = AbiCounter
)

// Sizes of the index spaces (the enums' terminators).
const (
	LaneSlots   = int(AbiLaneLANE_SLOTS)
	MatchKinds  = int(AbiMatchKindMATCH_KINDS)
	OpsCounters = int(AbiOpsCounterOPS_COUNTERS)
	ClassMinor  = uint32(AbiLaneClassLANE_CLASS_MINOR)
	// AckClassMinor is the HTB class minor of the ACK class
	AckClassMinor = uint32(AbiLaneClassLANE_ACK_CLASS_MINOR)
	// BgShapeClassMinor is the HTB class minor of the background non-TCP shaper
	BgShapeClassMinor = uint32(AbiLaneClassLANE_BG_SHAPE_CLASS_MINOR)
	// HeldAckClassMinor is the HTB class minor of the held downloads' ACKs
	HeldAckClassMinor = uint32(AbiLaneClassLANE_HELD_ACK_CLASS_MINOR)
)

var (
	enumsOnce sync.Once
	enums     map[string]*btf.Enum
	enumsErr  error
)

func loadEnums() {
	spec, err := LoadAbi()
	if err != nil {
		enumsErr = err
		return
	}
	enums = map[string]*btf.Enum{}
	for typ, err := range spec.Types.All() {
		if err != nil {
			enumsErr = err
			return
		}
		if e, ok := typ.(*btf.Enum); ok && e.Name != "" {
			enums[e.Name] = e
		}
	}
}

// Names returns the value names of the C enum `name` indexed by value, below
// its terminator `end` (e.g. "ops_counter", "OPS_COUNTERS"), lower-cased and
// without prefix: OPS_CAP_SET with prefix "OPS_" is "cap_set". Values
// without a name stay "".
func Names(name, prefix, end string) ([]string, error) {
	enumsOnce.Do(loadEnums)
	if enumsErr != nil {
		return nil, fmt.Errorf("lanes ABI BTF: %w", enumsErr)
	}
	e := enums[name]
	if e == nil {
		return nil, fmt.Errorf("lanes ABI: no enum %s", name)
	}
	n := -1
	for _, v := range e.Values {
		if v.Name == end {
			n = int(v.Value)
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("lanes ABI: enum %s has no %s", name, end)
	}
	out := make([]string, n)
	for _, v := range e.Values {
		if int(v.Value) < n && out[v.Value] == "" {
			out[v.Value] = strings.ToLower(strings.TrimPrefix(v.Name, prefix))
		}
	}
	return out, nil
}

// MustNames is Names for the enums this package itself generates from: the
// BTF is embedded at build time, so an error is a build defect.
func MustNames(name, prefix, end string) []string {
	out, err := Names(name, prefix, end)
	if err != nil {
		panic(err)
	}
	return out
}

// NewFlowKey builds a lanes_tuple key: destination address and port, local
// (source) address and port as the sender sees them. An invalid src matches
// any local address; proto 0 matches any protocol. IPv4 addresses are
// stored v4-mapped.
func NewFlowKey(src, dst netip.Addr, dport, sport uint16, proto uint8) FlowKey {
	k := FlowKey{Daddr: dst.As16(), Dport: dport, Sport: sport, Proto: proto}
	if src.IsValid() {
		k.Saddr = src.As16()
	}
	return k
}

// Addr returns the key's destination address, unmapped if it is IPv4.
func (k AbiFlowKey) Addr() netip.Addr {
	return netip.AddrFrom16(k.Daddr).Unmap()
}

// Src returns the key's local address, unmapped if it is IPv4, or the
// zero Addr for any local address.
func (k AbiFlowKey) Src() netip.Addr {
	if k.Saddr == ([16]uint8{}) {
		return netip.Addr{}
	}
	return netip.AddrFrom16(k.Saddr).Unmap()
}

// NewDstKey builds the lanes_dst key of a destination prefix and port (0 =
// any port). IPv4 prefixes are stored v4-mapped.
func NewDstKey(p netip.Prefix, dport uint16) DstKey {
	p = p.Masked()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	return DstKey{Prefixlen: uint32(16 + bits), Dport: [2]uint8{uint8(dport >> 8), uint8(dport)}, Daddr: p.Addr().As16()}
}

// Prefix and Port return what a lanes_dst key covers.
func (k AbiDstKey) Prefix() netip.Prefix {
	a := netip.AddrFrom16(k.Daddr)
	bits := int(k.Prefixlen) - 16
	if a.Is4In6() && bits >= 96 {
		return netip.PrefixFrom(a.Unmap(), bits-96)
	}
	return netip.PrefixFrom(a, bits)
}

func (k AbiDstKey) Port() uint16 { return uint16(k.Dport[0])<<8 | uint16(k.Dport[1]) }
