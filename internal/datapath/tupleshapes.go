// tupleshapes.go keeps lanes_tuple_shapes, the bitmask that lets the
// programs' flow_lookup (lanes_maps.h) skip the key shapes lanes_tuple
// holds none of: the host counts its keys of each shape, sets a shape's
// bit before the first such key goes in and clears it after the last one
// went. A packet that matches no flow then pays one hash lookup per shape
// in use instead of four.
package datapath

import (
	"errors"
	"math/bits"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
)

// tupleShapes counts lanes_tuple's keys per shape.
type tupleShapes struct {
	mu sync.Mutex
	n  [4]int
}

func (s *tupleShapes) mask(extra uint32) uint32 {
	m := extra
	for i, n := range s.n {
		if n > 0 {
			m |= 1 << i
		}
	}
	return m
}

// put adds or replaces k's lane.
func (s *tupleShapes) put(tuple, shapes *ebpf.Map, k abi.FlowKey, v uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old uint32
	existed := tuple.Lookup(k, &old) == nil
	bit := classifier.FlowShape(k)
	i := bits.TrailingZeros32(bit)
	first := !existed && s.n[i] == 0
	if first {
		if err := shapes.Put(uint32(0), s.mask(bit)); err != nil {
			return err
		}
	}
	if err := tuple.Put(k, v); err != nil {
		if first {
			_ = shapes.Put(uint32(0), s.mask(0))
		}
		return err
	}
	if !existed {
		s.n[i]++
	}
	return nil
}

// del removes k; ebpf.ErrKeyNotExist if it was not there.
func (s *tupleShapes) del(tuple, shapes *ebpf.Map, k abi.FlowKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := tuple.Delete(k); err != nil {
		return err
	}
	i := bits.TrailingZeros32(classifier.FlowShape(k))
	if s.n[i] > 0 {
		s.n[i]--
	}
	if s.n[i] == 0 {
		if err := shapes.Put(uint32(0), s.mask(0)); err != nil {
			return errors.Join(errors.New("clear a flow key shape"), err)
		}
	}
	return nil
}
