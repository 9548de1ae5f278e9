// supervise.go: the daemon's optional components (coop controller, realtime
// lane) run under a supervisor. A component whose Run returns an error (its
// socket vanished, a resource ran out) is closed, shown as failed in status
// and the component op, and started afresh after a backoff of 1 s doubling to
// 30 s (back to 1 s after a run of a minute or more). Stopping the daemon or a
// reload ends the loop.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// runner is one incarnation of a component: built by the component's start
// function, run until it fails or is stopped, then closed.
type runner struct {
	run    func(context.Context) error
	close  func() error
	status func() string
	detail func() any // the component's status document (api component op)
}

// component is a supervised component.
type component struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	cur      *runner // nil while failed
	failure  error
	restarts int
	retryAt  time.Time
}

// Supervision backoff bounds; a run at least backoffReset long resets it.
const (
	backoffMin   = time.Second
	backoffMax   = 30 * time.Second
	backoffReset = time.Minute
)

// supervise starts a component: a failure of the first start is returned,
// later failures are retried.
func supervise(log *slog.Logger, name string, start func() (*runner, error)) (*component, error) {
	r, err := start()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &component{name: name, cancel: cancel, done: make(chan struct{}), cur: r}
	go c.loop(ctx, log, r, start)
	return c, nil
}

func (c *component) loop(ctx context.Context, log *slog.Logger, r *runner, start func() (*runner, error)) {
	defer close(c.done)
	backoff := backoffMin
	for {
		var err error
		if r != nil {
			began := time.Now()
			err = r.run(ctx)
			if cerr := r.close(); cerr != nil {
				log.Warn("component close", "component", c.name, "err", cerr)
			}
			if time.Since(began) >= backoffReset {
				backoff = backoffMin
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = fmt.Errorf("stopped by itself")
		}
		c.fail(err, backoff)
		log.Error("component failed; restarting", "component", c.name, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffMax)
		if r, err = start(); err != nil {
			r = nil
			log.Error("component restart failed", "component", c.name, "err", err)
			continue
		}
		c.mu.Lock()
		c.cur, c.failure = r, nil
		c.restarts++
		c.mu.Unlock()
		log.Info("component restarted", "component", c.name, "restarts", c.restarts)
	}
}

func (c *component) fail(err error, backoff time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.failure, c.retryAt = nil, err, time.Now().Add(backoff)
}

// stop ends the component and waits until it is closed.
func (c *component) stop() {
	c.cancel()
	<-c.done
}

// status is the component's status line; a failed one says so.
func (c *component) status() string {
	c.mu.Lock()
	r, failure, restarts, at := c.cur, c.failure, c.restarts, c.retryAt
	c.mu.Unlock()
	if r == nil {
		return fmt.Sprintf("FAILED: %v (restart %d in %s)", failure, restarts+1, time.Until(at).Round(time.Second))
	}
	s := r.status()
	if restarts > 0 {
		s += fmt.Sprintf(" (restarted %d times)", restarts)
	}
	return s
}

// detail is the component's status document, or its failure.
func (c *component) detail() any {
	c.mu.Lock()
	r, failure, restarts := c.cur, c.failure, c.restarts
	c.mu.Unlock()
	if r == nil {
		return map[string]any{"failed": failure.Error(), "restarts": restarts}
	}
	return r.detail()
}
