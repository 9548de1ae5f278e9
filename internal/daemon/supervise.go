// supervise.go: the daemon's optional components (coop controller, realtime
// lane) run under a supervisor. A component whose Run returns an error (its
// socket vanished, a resource ran out) is closed, shown as failed in status
// and the component op, and started afresh after a backoff of 1 s doubling to
// 30 s (back to 1 s after a run of a minute or more). Stopping the daemon or a
// reload ends the loop. A component whose first start may fail for a reason
// that passes (coop: another process holds its UDP port) starts waiting
// instead (superviseWaiting): status says why, and the start is retried on
// the same backoff until it succeeds.
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
	cur      *runner // nil while failed or waiting
	failure  error
	waiting  bool // it never started: the first start failed, retried
	restarts int
	retryAt  time.Time
	key      any // the configuration it runs (a reload keeps an unchanged one)
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
	return superviseFrom(log, name, r, start), nil
}

// superviseWaiting is supervise for a component whose first start may
// fail for a while: it never fails, a component that could not start
// waits and retries.
func superviseWaiting(log *slog.Logger, name string, start func() (*runner, error)) *component {
	r, err := start()
	if err != nil {
		log.Warn("component waiting to start; retrying", "component", name, "err", err, "in", backoffMin)
	}
	c := superviseFrom(log, name, r, start)
	if r == nil {
		c.mu.Lock()
		c.failure, c.waiting, c.retryAt = err, true, time.Now().Add(backoffMin)
		c.mu.Unlock()
	}
	return c
}

func superviseFrom(log *slog.Logger, name string, r *runner, start func() (*runner, error)) *component {
	ctx, cancel := context.WithCancel(context.Background())
	c := &component{name: name, cancel: cancel, done: make(chan struct{}), cur: r}
	go c.loop(ctx, log, r, start)
	return c
}

func (c *component) loop(ctx context.Context, log *slog.Logger, r *runner, start func() (*runner, error)) {
	defer close(c.done)
	backoff := backoffMin
	for {
		if r != nil {
			began := time.Now()
			err := r.run(ctx)
			if cerr := r.close(); cerr != nil {
				log.Warn("component close", "component", c.name, "err", cerr)
			}
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) >= backoffReset {
				backoff = backoffMin
			}
			if err == nil {
				err = fmt.Errorf("stopped by itself")
			}
			c.fail(err, backoff)
			log.Error("component failed; restarting", "component", c.name, "err", err, "in", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffMax)
		var err error
		if r, err = start(); err != nil {
			c.fail(err, backoff)
			log.Error("component restart failed", "component", c.name, "err", err, "in", backoff)
			continue
		}
		c.mu.Lock()
		msg := "component started after waiting"
		if !c.waiting {
			c.restarts++
			msg = "component restarted"
		}
		c.cur, c.failure, c.waiting = r, nil, false
		restarts := c.restarts
		c.mu.Unlock()
		log.Info(msg, "component", c.name, "restarts", restarts)
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
	r, failure, restarts, at, waiting := c.cur, c.failure, c.restarts, c.retryAt, c.waiting
	c.mu.Unlock()
	if r == nil && waiting {
		return fmt.Sprintf("WAITING to start: %v (next try in %s)", failure, time.Until(at).Round(time.Second))
	}
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
	r, failure, restarts, waiting := c.cur, c.failure, c.restarts, c.waiting
	c.mu.Unlock()
	if r == nil && waiting {
		return map[string]any{"waiting": failure.Error()}
	}
	if r == nil {
		return map[string]any{"failed": failure.Error(), "restarts": restarts}
	}
	return r.detail()
}
