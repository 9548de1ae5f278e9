// Package rtlane is the realtime lane's control plane, run by the daemon:
// clients hand datagrams with deadlines over a unix SOCK_SEQPACKET socket
// (docs/realtime.md); lanes-rtd, a process of its own (rtd.go, rtd/ in the
// source tree), admits or refuses each at once with the EDF admission test
// (the arithmetic of package edf), releases admitted datagrams earliest
// deadline first into the top qdisc class, from the client's own UDP
// socket when it attached one, else from the lane's own, and replies.
//
//	client --seqpacket--> lane: accept, credentials, grants, limits
//	                        | granted: the connection, by SCM_RIGHTS
//	                        v
//	                 lanes-rtd (one SCHED_FIFO thread, epoll):
//	                   read, admit (T_now), release (pace, late? drop+notify : send), reply
//	                        |
//	  the client's UDP socket (SO_PRIORITY 1:11 per datagram) or the lane's
//	  (SO_PRIORITY = 1:11) --> HTB realtime leaf --> device
//
//	  - T = (payload + overhead) * 8 / rate.
//	  - T_now = max(now, busyUntil) + reserve/rate, where busyUntil is when the
//	    realtime bytes already handed to the kernel will have left (what
//	    cannot be preempted), reserve the frame on the wire and device queue
//	    that are not ours.
//	  - Pacing (paper §3.3): a datagram is released only if busyUntil - now +
//	    T <= backlog/rate (or nothing of ours is in flight), so the kernel never
//	    holds more than `backlog` bytes of realtime traffic and a tight
//	    newcomer waits behind at most that.
//	  - A head that can no longer finish by its deadline when released is
//	    dropped and reported to its sender (TypeDropped), never sent late.
//
// The lane keeps what needs the daemon: the listening socket, ungranted
// clients (answered here, conn.go), the egress class of each destination
// (netlink) and the counters' JSON. When the egress device has no lanes
// HTB root (1:), skb->priority 1:11 would mean band 2 of pfifo_fast (low
// nibble 1 = TC_PRIO_FILLER), so datagrams to such devices go out with
// priority 6 (TC_PRIO_INTERACTIVE, band 0); the choice is made per
// destination from its route, refreshed every 2 s.
//
// lane.go is the Lane itself: its state, New, Run and Close. The rest, a
// file each: the sockets (network.go), the clients' connections (conn.go),
// lanes-rtd and its control protocol (rtd.go, rtdctl.go), the destinations'
// class (route.go), the counters (stats.go), the trace (trace.go), the
// priority that follows the clients (clientprio.go) and the PM QoS request
// (wake.go).
package rtlane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
)

// Lane is the realtime lane. New, then Run; Close stops it.
type Lane struct {
	cfg   config.Realtime
	log   *slog.Logger
	lfd   int // listening unix socket, -1 when closed
	lfdMu sync.Mutex
	nl    *netlink.Handle
	tx    [2][2]int     // UDP sockets [v4|v6][plain|class] lanes-rtd sends from, -1 = none
	rate  atomic.Uint64 // bit/s
	trace func(Event)

	// This process's counters: ungranted clients' refusals (stats.go).
	own ownCounters

	clients connTable // the client connections and their limits (conn.go)
	pace    *uidPacer // the requests of ungranted clients, per uid (pace.go)
	// Clients' own sockets: whether this kernel and namespace allow them
	// and the namespace's cookie they must have (lanes-rtd checks).
	attachOK bool
	netns    uint64

	done      chan struct{}
	closeOnce sync.Once
	started   atomic.Bool
	runDone   chan struct{}

	// Which destinations leave through a device with the lanes tree
	// (route.go).
	route routeTable

	// The data path process (rtd.go): its executable, the running process
	// and the priority it was given (the connections handed to it by id
	// are the clients').
	helper string
	rtd    *rtdProc
	// lanes-rtd's counters as last asked for a client (clientStats).
	statsMu     sync.Mutex
	statsAt     time.Time
	statsHelper Snapshot
	statsErr    error
	prio        helperPriority
}

// Option adjusts a Lane at construction.
type Option func(*Lane)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(x *Lane) { x.log = l } }

// WithTrace sets a function called for every admission, refusal, release and
// drop (lanes-rtd's events, read from a pipe on a goroutine; SyncTrace
// waits for those of what has happened so far).
func WithTrace(f func(Event)) Option { return func(x *Lane) { x.trace = f } }

// WithHelper runs the data path in the lanes-rtd at path (default:
// FindHelper's).
func WithHelper(path string) Option { return func(x *Lane) { x.helper = path } }

// ErrNoHelper: lanes-rtd is not installed with this lanes; the realtime
// lane cannot run (the rest of lanes can).
var ErrNoHelper = errors.New("realtime: no " + HelperName + " beside the lanes executable or in ../libexec/lanes/ (make build, make install and the .deb put it there)")

// New validates cfg, listens on cfg.Socket, opens the sending sockets in
// the calling thread's network namespace and starts lanes-rtd.
func New(cfg config.Realtime, opts ...Option) (*Lane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("realtime config: %w", err)
	}
	l := &Lane{
		cfg: cfg, log: slog.Default(), lfd: -1, tx: [2][2]int{{-1, -1}, {-1, -1}},
		own: newOwnCounters(), clients: newConnTable(cfg),
		done: make(chan struct{}), runDone: make(chan struct{}),
		helper: FindHelper(), pace: newUIDPacer(cfg.ClientRequests),
	}
	for _, o := range opts {
		o(l)
	}
	if l.helper == "" {
		return nil, ErrNoHelper
	}
	l.rate.Store(cfg.Rate.Bits())
	l.clients.wake.latencyUS, l.clients.wake.log = cfg.PMLatencyUS, l.log
	l.route.lookups = make(chan netip.Addr, 64)
	ok := false
	defer func() {
		if !ok {
			l.closeSockets()
		}
	}()
	if err := l.openNetwork(); err != nil {
		return nil, err
	}
	if err := l.listen(); err != nil {
		return nil, err
	}
	l.prio = helperPriority{rule: priorityRule{release: cfg.ReleasePriority, follow: cfg.FollowClientPriority}, log: l.log}
	p, err := startRTD(rtdStart{path: l.helper, tx: l.tx, trace: l.trace != nil, config: *l.rtdConfig(),
		route: (*l.route.routes.Load())[netip.Addr{}], prio: cfg.ReleasePriority, log: l.log})
	if err != nil {
		return nil, err
	}
	l.rtd = p
	ok = true
	return l, nil
}

// SetRate changes the link rate used for transmit times (bit/s), e.g. to a
// shaped uplink rate; 0 is ignored.
func (l *Lane) SetRate(bps uint64) {
	if bps > 0 {
		l.rate.Store(bps)
		if p := l.rtd; p != nil {
			_ = p.send(l.rtdConfig(), -1)
		}
	}
}

// Rate is the link rate in use, bit/s.
func (l *Lane) Rate() uint64 { return l.rate.Load() }

// Addr is the unix socket path.
func (l *Lane) Addr() string { return l.cfg.Socket }

// DataPath names where the data path runs: lanes-rtd, a process of its
// own (status and doctor show it).
func (l *Lane) DataPath() string { return HelperName }

// Run serves clients until ctx ends, Close, or lanes-rtd ends (an error:
// the daemon restarts the lane).
func (l *Lane) Run(ctx context.Context) error {
	if !l.started.CompareAndSwap(false, true) {
		return errors.New("realtime: Run called twice")
	}
	defer close(l.runDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var helperErr error
	p := l.rtd
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := p.serveHelper(&l.route, l); ctx.Err() == nil && !l.isClosed() {
			helperErr = err
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		l.followClients(ctx)
	}()
	go func() {
		defer wg.Done()
		l.route.refreshRoutes(ctx, 2*time.Second, l)
	}()
	if p.trace != nil {
		wg.Add(1)
		go func() { defer wg.Done(); p.readTrace(l.trace) }()
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-l.done:
		}
		l.shutdownListener() // unblocks accept
	}()
	l.log.Info("realtime lane listening", "socket", l.cfg.Socket, "rate_bps", l.Rate(), "backlog", l.cfg.Backlog,
		"data_path", l.DataPath())
	err := l.acceptLoop(ctx, &wg)
	cancel()
	l.stopServing(p, &wg)
	return errors.Join(err, helperErr)
}

// stopServing ends what Run started, once accept has returned: it wakes
// every connection's reader, stops lanes-rtd, waits for Run's goroutines
// and untracks the connections lanes-rtd held.
func (l *Lane) stopServing(p *rtdProc, wg *sync.WaitGroup) {
	l.clients.mu.Lock()
	l.clients.closed = true
	for c := range l.clients.conns {
		if c.fd >= 0 {
			_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // wakes its reader
		}
	}
	l.clients.mu.Unlock()
	_ = p.stop()
	wg.Wait()
	p.close()
	l.clients.mu.Lock()
	ids := make([]uint32, 0, len(l.clients.handed))
	for id := range l.clients.handed {
		ids = append(ids, id)
	}
	l.clients.mu.Unlock()
	for _, id := range ids {
		l.helperClosed(id)
	}
}

func (l *Lane) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close stops Run (if running) and lanes-rtd, and releases the sockets.
func (l *Lane) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		if l.started.Load() {
			<-l.runDone
		} else if p := l.rtd; p != nil {
			_ = p.stop()
			p.close()
		}
		err = l.closeSockets()
	})
	return err
}

func (l *Lane) closeSockets() error {
	var errs []error
	l.lfdMu.Lock()
	if l.lfd >= 0 {
		_ = unix.Shutdown(l.lfd, unix.SHUT_RDWR)
		if err := unix.Close(l.lfd); err != nil {
			errs = append(errs, err)
		}
		l.lfd = -1
		// The socket file is ours (listen bound it).
		if err := os.Remove(l.cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	l.lfdMu.Unlock()
	for i := range l.tx {
		for j, fd := range l.tx[i] {
			if fd >= 0 {
				unix.Close(fd)
				l.tx[i][j] = -1
			}
		}
	}
	if l.nl != nil {
		l.nl.Close()
	}
	return errors.Join(errs...)
}

// shutdownListener makes a blocked accept return, keeping the fd open
// until Close (so its number is not reused under accept).
func (l *Lane) shutdownListener() {
	l.lfdMu.Lock()
	if l.lfd >= 0 {
		_ = unix.Shutdown(l.lfd, unix.SHUT_RDWR)
	}
	l.lfdMu.Unlock()
}
