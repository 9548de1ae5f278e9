// guard.go: the host's lifetime lock, shared by the host and each of its
// owners (lane maps, trees, background class, ...): map operations run
// under its read lock, Close takes it to write; after Close every
// operation returns errClosed.
package datapath

import "sync"

// guard is what every owner of the host's kernel objects shares: one lock
// and whether the host is closed.
type guard struct {
	mu     sync.RWMutex // read: map operations; write: Close
	closed bool
}

// use runs fn under the read lock unless the host is closed.
func (g *guard) use(fn func() error) error {
	if g == nil {
		return errClosed
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return errClosed
	}
	return fn()
}

// close runs fn under the write lock once, marking the host closed; a
// second close does nothing.
func (g *guard) close(fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return fn()
}
