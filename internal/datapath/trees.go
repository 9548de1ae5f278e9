// trees.go: the egress trees opened with the host, and their ACK class
// (ackclass.go): Trees owns the set of trees and the class's rate, so
// that a tree opened while the rate changes gets the new one; the
// background class's shapers find an interface's tree here.
package datapath

import (
	"fmt"
	"sync"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
)

// Trees is the host's egress trees and their ACK class's rate.
type Trees struct {
	guard *guard
	cls   *classifier.ClassifierObjects // lanes_ack_on, lanes_ack_stats

	mu       sync.Mutex       // before an Egress's mu
	egresses map[*Egress]bool // the trees opened with this host
	ackBytes uint64           // the ACK class's rate, bytes/s (0: off)
}

// add records e as one of the host's trees; it returns the ACK
// class's rate the tree must have.
func (t *Trees) add(e *Egress) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.egresses == nil {
		t.egresses = map[*Egress]bool{}
	}
	t.egresses[e] = true
	return t.ackBytes
}

// remove forgets a closed tree.
func (t *Trees) remove(e *Egress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.egresses, e)
}

// of is the host's tree on ifindex.
func (t *Trees) of(ifindex int) (*Egress, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := range t.egresses {
		if e.link != nil && e.link.Attrs().Index == ifindex {
			return e, nil
		}
	}
	return nil, fmt.Errorf("no egress tree on ifindex %d", ifindex)
}
