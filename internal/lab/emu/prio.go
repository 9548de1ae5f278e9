// prio.go: a user-space priority task between a host's TUN and its uplink,
// the LW-LBE paper's "task-based lower-than-best-effort" baseline.
//
//   - enqueue (TUN reader): classify the packet by the registered 3-tuples
//     (destination IP, destination port, source port) into the high or the
//     low queue; drop-tail at Limit packets per queue.
//   - run (the priority task, one OS thread): wait until the device queue
//     has room, then move the head of the highest non-empty queue into it.
//
// Note: the task runs on its own locked OS thread so that its CPU time can
// be read from /proc/self/task/TID/stat (ThreadCPU), the cost the paper
// charges to task-based designs.
package emu

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// FlowKey is the paper's registration 3-tuple.
type FlowKey struct {
	Dst   netip.AddrPort
	Sport uint16
}

// Prioritiser serves two queues strictly by priority.
type Prioritiser struct {
	Limit int // packets per queue (default 1000, like txqueuelen)

	mu     sync.Mutex
	low    map[FlowKey]bool
	q      [2][][]byte
	signal chan struct{}
	link   *Link
	tid    atomic.Int32

	Moved   [2]atomic.Uint64
	Dropped [2]atomic.Uint64
}

// NewPrioritiser returns an empty prioritiser.
func NewPrioritiser() *Prioritiser {
	return &Prioritiser{Limit: 1000, low: map[FlowKey]bool{}, signal: make(chan struct{}, 1)}
}

// Register puts a flow in the low-priority queue.
func (p *Prioritiser) Register(k FlowKey) {
	p.mu.Lock()
	p.low[k] = true
	p.mu.Unlock()
}

// FlowOf extracts the 3-tuple of an IPv4 TCP or UDP packet.
func FlowOf(b []byte) (FlowKey, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return FlowKey{}, false
	}
	ihl := int(b[0]&0x0f) * 4
	if b[9] != unix.IPPROTO_TCP && b[9] != unix.IPPROTO_UDP || len(b) < ihl+4 {
		return FlowKey{}, false
	}
	dst := netip.AddrFrom4([4]byte{b[16], b[17], b[18], b[19]})
	sport := uint16(b[ihl])<<8 | uint16(b[ihl+1])
	dport := uint16(b[ihl+2])<<8 | uint16(b[ihl+3])
	return FlowKey{Dst: netip.AddrPortFrom(dst, dport), Sport: sport}, true
}

func (p *Prioritiser) enqueue(b []byte) {
	c := 0
	p.mu.Lock()
	if k, ok := FlowOf(b); ok && p.low[k] {
		c = 1
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	if len(p.q[c]) >= limit {
		p.mu.Unlock()
		p.Dropped[c].Add(1)
		return
	}
	p.q[c] = append(p.q[c], b)
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func (p *Prioritiser) dequeue() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.q {
		if len(p.q[c]) > 0 {
			b := p.q[c][0]
			p.q[c][0] = nil
			p.q[c] = p.q[c][1:]
			p.Moved[c].Add(1)
			return b
		}
	}
	return nil
}

func (p *Prioritiser) run(ctx context.Context) {
	runtime.LockOSThread()
	p.tid.Store(int32(unix.Gettid()))
	for {
		if p.link.WaitRoom(ctx) != nil {
			return
		}
		b := p.dequeue()
		if b == nil {
			select {
			case <-p.signal:
				continue
			case <-ctx.Done():
				return
			}
		}
		p.link.EnqueueAdmitted(b, nil)
	}
}

// ThreadCPU returns the CPU time (user+system) the priority task's thread
// has used so far (0 before it started).
func (p *Prioritiser) ThreadCPU() time.Duration {
	tid := p.tid.Load()
	if tid == 0 {
		return 0
	}
	return ThreadCPU(os.Getpid(), int(tid))
}
