// controller.go: the controller's loop. It blocks on the classifier's
// events (an interface's background non-TCP traffic began after a quiet
// second) and wakes nobody at rest; per such interface an episode probes
// the class's peers in turn, one every Rule.Interval, steps the rule on
// the direction that carries more of the class's bytes over about a
// second (direction.go) and ends, releasing the rates, after
// episodeQuiet without a packet of the class.
package bgudp

import (
	"context"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/datapath"
)

const episodeQuiet = 2 * time.Second

// stepNice is the nice value of an episode's thread. Its steps keep a
// remote queue short only if they come on time: an unresponsive sender
// shaped above the link between two late steps builds a queue of the
// excess for as long (beside a UDP call, a second late is 350 ms of queue).
// Under CPU load a nice-0 thread competes with the load; -10 has ~10x the
// weight of a nice-0 hog (the task engine's watcher runs so too). The
// probes' reader runs so as well: it stamps each answer's arrival.
const stepNice = -10

// ownThreadAtStepNice locks the calling goroutine to its thread, never
// unlocked (the thread ends with the goroutine, nice and all), and sets
// the thread's nice to stepNice.
func ownThreadAtStepNice() error {
	runtime.LockOSThread()
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: stepNice}
	return unix.SchedSetAttr(0, &a, 0)
}

// Datapath is what the controller needs of the host datapath
// (the host's background class, *datapath.BackgroundClass).
type Datapath interface {
	BgEvents() (<-chan datapath.BgEvent, func(), error)
	BgClass(ifindex int, d datapath.Direction) (datapath.BgClass, error)
	SetBgRate(ifindex int, d datapath.Direction, bytes uint64, empty bool) error
	BgClassHeld(ifindex int, d datapath.Direction) bool
	BackgroundFlows() ([]datapath.BgFlow, error)
	Foreground(ifindex int, d datapath.Direction) (present, quiet bool)
	MarkBgActive()
	DirectionQueue(ifindex int, d datapath.Direction, fresh time.Duration) (time.Duration, bool)
	MarkOwnHarm(ifindex int, queue time.Duration)
	SetBgShape(ifindex int, d datapath.Direction, bytes uint64) error
	SetBgYieldRate(ifindex int, d datapath.Direction, bytes uint64) error
	SetBgAcks(ifindex int, d datapath.Direction, acks bool) error
	BgShapeStats(ifindex int, d datapath.Direction) (datapath.LaneStats, error)
	LinkBytes(ifindex int) (sent, received uint64, err error)
	RaiseUploadRate(ifindex int, bytes uint64) error
	OwnSocket(c syscall.Conn) (func(), error)
}

var _ Datapath = (*datapath.BackgroundClass)(nil)

// Episodes runs the episodes of every interface.
type Episodes struct {
	rule   Rule
	dp     Datapath
	log    *slog.Logger
	events <-chan datapath.BgEvent
	cancel func() // ends events

	mu       sync.Mutex
	episodes map[int]*episode // by ifindex, while running
	last     map[int]Episode  // the last finished one
	wg       sync.WaitGroup
}

// New subscribes to the classifier's episode events (the datapath reads
// them, bgevents.go).
func New(rule Rule, dp Datapath, log *slog.Logger) (*Episodes, error) {
	events, cancel, err := dp.BgEvents()
	if err != nil {
		return nil, err
	}
	return &Episodes{rule: rule, dp: dp, log: log, events: events, cancel: cancel,
		episodes: map[int]*episode{}, last: map[int]Episode{}}, nil
}

// Close ends the subscription (Run returns).
func (c *Episodes) Close() error {
	c.cancel()
	return nil
}

// Run starts episodes at the events until ctx ends or the subscription
// does, and waits for the episodes it started.
func (c *Episodes) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer c.wg.Wait()
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-c.events:
			if !ok {
				return nil
			}
			c.start(ctx, int(ev.Ifindex), netip.AddrFrom16(ev.Peer))
		}
	}
}

// start runs an episode on ifindex unless one runs.
func (c *Episodes) start(ctx context.Context, ifindex int, peer netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.episodes[ifindex] != nil {
		return
	}
	e := &episode{Episode: Episode{Ifindex: ifindex, Peer: peer.Unmap(), Started: time.Now()}, state: State{Rule: c.rule}}
	c.episodes[ifindex] = e
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := ownThreadAtStepNice(); err != nil {
			c.log.Debug("bgudp: episode thread keeps default nice", "err", err)
		}
		err := e.run(ctx, c.dp, c.log)
		if err != nil {
			c.log.Warn("bgudp: episode ended", "ifindex", ifindex, "peer", e.Peer, "err", err)
		}
		c.mu.Lock()
		delete(c.episodes, ifindex)
		e.mu.Lock()
		e.Ended, e.Err = time.Now(), errString(err)
		c.last[ifindex] = e.snapshotLocked()
		e.mu.Unlock()
		c.mu.Unlock()
	}()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Status is the controller's state: the running episodes and each
// interface's last finished one, by ifindex.
type Status struct {
	Running map[int]Episode
	Last    map[int]Episode
	Rule    Rule
}

// Status reads the controller's state.
func (c *Episodes) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Status{Running: map[int]Episode{}, Last: map[int]Episode{}, Rule: c.rule}
	for i, e := range c.episodes {
		e.mu.Lock()
		st.Running[i] = e.snapshotLocked()
		e.mu.Unlock()
	}
	for i, e := range c.last {
		st.Last[i] = e
	}
	return st
}
