// Package rtlane is the realtime lane's datapath, run by the daemon: clients
// hand it datagrams with deadlines over a unix SOCK_SEQPACKET socket
// (docs/realtime.md), it admits or refuses each at once with the EDF
// admission test of package edf, and releases admitted datagrams earliest
// deadline first into the top qdisc class, from the client's own UDP
// socket when it attached one (appsock.go), else from the lane's own.
//
// Data path:
//
//		client --seqpacket--> conn reader: parse, grant check, Admit(T_now) --reply--> client
//		                          |
//		                      edf.Tree (mu)
//		                          |
//		                      releaser: pace, Pop(T_now), late? drop+notify : sendto
//		                          |
//		  the client's UDP socket (SO_PRIORITY 1:11 per datagram) or the lane's
//		  (SO_PRIORITY = 1:11) --> HTB realtime leaf --> device
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
// Note: when the egress device has no lanes HTB root (1:), skb->priority
// 1:11 would mean band 2 of pfifo_fast (low nibble 1 = TC_PRIO_FILLER), so
// datagrams to such devices go out of a second socket with priority 6
// (TC_PRIO_INTERACTIVE, band 0). The choice is made per destination from
// its route and cached for a second.
package rtlane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/edf"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// Monotonic returns CLOCK_MONOTONIC in nanoseconds, the clock of
// deadlines. It is the runtime's nanotime, which reads exactly that clock
// through the vDSO: ~30 ns where the clock_gettime system call costs
// ~400 ns on the project's VM, and no entersyscall/exitsyscall, whose slow
// path (the P taken away meanwhile) would put a wait for Go's scheduler
// between a realtime thread's timestamps.
func Monotonic() int64 { return nanotime() }

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// EventKind is a point in a datagram's life, for traces (the lab's
// timestamps 2 and 3: enqueue and dequeue).
type EventKind uint8

const (
	EvAdmit   EventKind = iota + 1 // admitted and queued (enqueue)
	EvReject                       // refused at once
	EvRelease                      // popped and about to be sent (dequeue)
	EvDrop                         // popped but late, or send failed
)

// Event is one trace record.
type Event struct {
	Kind     EventKind
	Time     int64 // CLOCK_MONOTONIC ns
	UID      uint32
	Flow     uint32
	Seq      uint32
	Deadline int64
	Tx       int64
	Reason   uint8
}

// Counters are per flow and in total.
type Counters struct {
	Admitted    uint64 `json:"admitted"`
	Rejected    uint64 `json:"rejected"`
	Sent        uint64 `json:"sent"`
	SentBytes   uint64 `json:"sent_bytes"`
	DroppedLate uint64 `json:"dropped_late"`
	SendErrors  uint64 `json:"send_errors"`
	// MinMarginNs is the smallest deadline - (release + T) seen: how close
	// to its deadline any sent datagram was planned to finish.
	MinMarginNs int64 `json:"min_margin_ns"`
}

// FlowStats is one flow's counters; a flow is (uid, client flow id).
type FlowStats struct {
	UID  uint32 `json:"uid"`
	Flow uint32 `json:"flow"`
	Counters
	Rejects map[string]uint64 `json:"rejects,omitempty"`
}

// Snapshot is what `lanes rt stats` shows.
type Snapshot struct {
	RateBps   uint64      `json:"rate_bps"`
	Depth     int         `json:"depth"`
	BacklogNs int64       `json:"queued_ns"`
	Totals    Counters    `json:"totals"`
	Flows     []FlowStats `json:"flows"`
	// Truncated: flows left out so that the STATS reply fits.
	Truncated bool `json:"truncated,omitempty"`
	// DataPath: where the data path runs (Lane.DataPath).
	DataPath string `json:"data_path"`
	// Error: why the counters are incomplete (lanes-rtd did not answer).
	Error string `json:"error,omitempty"`
	connStats
}

type flowKey struct{ uid, flow uint32 }

// pending is one admitted datagram waiting in the EDF queue.
type pending struct {
	c        *conn
	key      flowKey
	seq      uint32
	dst      netip.AddrPort
	s        *appSock // the client's socket to send it from (nil: the lane's); holds a reference
	payload  []byte
	deadline int64
}

// pendingFree recycles pending datagrams and their payload buffers: the
// realtime path allocates nothing per datagram in steady state, so the
// garbage collector, whose stop-the-world waits for every thread including
// normal-priority ones, runs rarely. A free list under a SpinLock, not a
// sync.Pool: the realtime threads take and return datagrams pinned
// (pin.go), where a goroutine must never park, and a pool's slow path
// (on each P's first use after every collection) takes a sync.Mutex.
var pendingFree struct {
	mu   SpinLock
	list []*pending
}

// Bounds of what the free list keeps: pendingFreeMax buffers of at most
// pendingKeepCap bytes (4 MiB); larger or further ones go to the collector.
const (
	pendingFreeMax = 1024
	pendingKeepCap = 4096
)

func getPending() *pending {
	pendingFree.mu.Lock()
	if n := len(pendingFree.list); n > 0 {
		pk := pendingFree.list[n-1]
		pendingFree.list[n-1] = nil
		pendingFree.list = pendingFree.list[:n-1]
		pendingFree.mu.Unlock()
		return pk
	}
	pendingFree.mu.Unlock()
	return &pending{payload: make([]byte, 0, 2048)}
}

func putPending(pk *pending) {
	if pk.s != nil {
		pk.s.put()
		pk.s = nil
	}
	if cap(pk.payload) > pendingKeepCap {
		return
	}
	*pk = pending{payload: pk.payload[:0]}
	pendingFree.mu.Lock()
	if len(pendingFree.list) < pendingFreeMax {
		pendingFree.list = append(pendingFree.list, pk)
	}
	pendingFree.mu.Unlock()
}

// Lane is the realtime lane. New, then Run; Close stops it.
type Lane struct {
	cfg   Config
	log   *slog.Logger
	lfd   int // listening unix socket, -1 when closed
	lfdMu sync.Mutex
	nl    *netlink.Handle
	tx    [2][2]int // UDP sockets [v4|v6][plain|class], -1 = none

	rate    atomic.Uint64 // bit/s
	reserve int64         // bytes
	bound   int64         // bytes
	trace   func(Event)

	mu SpinLock // queue, pending, busyUntil, counters, the two flags below (spin.go: why not sync.Mutex)
	q  *edf.Tree
	// releaserIdle: the releaser found the queue empty and sleeps until
	// kicked; sending: an admitting thread is releasing directly.
	releaserIdle, sending bool
	pend                  map[uint64]*pending
	nextID                uint64
	busyUntil             int64
	flows                 map[flowKey]*FlowStats
	uidFlows              map[uint32]int // flows entries per uid (bounded: flow)
	totals                Counters

	connMu       sync.Mutex // conns, perUID, closed (conn.go)
	conns        map[*conn]struct{}
	perUID       map[uint32]int
	others       int // connections of clients neither root nor granted
	closed       bool
	wake         wakeState // the PM QoS request while granted clients are connected (wake.go)
	refusedConns atomic.Uint64
	acceptErrors atomic.Uint64
	// Clients' own sockets (appsock.go): whether this kernel and namespace
	// allow them, the namespace's cookie they must have, how many are open.
	attachOK bool
	netns    uint64
	appSocks atomic.Int64

	efd     int // eventfd: admissions wake the releaser through the kernel
	done    chan struct{}
	closeMu sync.Once
	started atomic.Bool
	runDone chan struct{}

	// Which destinations leave through a device with the lanes tree: an
	// immutable snapshot the realtime threads read without locking; a
	// background goroutine looks new destinations up and refreshes them. Netlink dumps take the RTNL lock,
	// which namespace churn elsewhere can hold for tens of milliseconds: never
	// on the release path.
	routeMu sync.Mutex // serializes writers of routes
	routes  atomic.Pointer[map[netip.Addr]bool]
	lookups chan netip.Addr // new destinations for the refresher

	// The data path process (rtd.go): its path ("" in this process), and
	// while it runs, the process, the connections handed to it by id
	// (connMu) and the priority it was given.
	helper     string
	helperSet  bool
	rtd        atomic.Pointer[rtdProc]
	handed     map[uint32]*conn
	nextConn   uint32
	helperPrio int
}

// Option adjusts a Lane at construction.
type Option func(*Lane)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(x *Lane) { x.log = l } }

// WithTrace sets a function called for every admission, refusal, release and
// drop, synchronously on the hot path: keep it short.
func WithTrace(f func(Event)) Option { return func(x *Lane) { x.trace = f } }

// New validates cfg, listens on cfg.Socket and opens the sending sockets in
// the calling thread's network namespace.
func New(cfg Config, opts ...Option) (*Lane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("realtime config: %w", err)
	}
	l := &Lane{
		cfg: cfg, log: slog.Default(), lfd: -1, tx: [2][2]int{{-1, -1}, {-1, -1}},
		reserve: int64(cfg.Reserve), bound: int64(cfg.Backlog),
		q: edf.NewTree(1024), pend: map[uint64]*pending{},
		flows: map[flowKey]*FlowStats{}, uidFlows: map[uint32]int{},
		conns: map[*conn]struct{}{}, perUID: map[uint32]int{},
		efd: -1, done: make(chan struct{}), runDone: make(chan struct{}),
		totals: Counters{MinMarginNs: 1<<63 - 1},
	}
	for _, o := range opts {
		o(l)
	}
	if !l.helperSet {
		l.helper = FindHelper()
	}
	l.handed = map[uint32]*conn{}
	l.rate.Store(cfg.Rate.Bits())
	l.lookups = make(chan netip.Addr, 64)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("realtime: eventfd: %w", err)
	}
	l.efd = efd
	ok := false
	defer func() {
		if !ok {
			l.closeSockets()
		}
	}()
	// Netlink handle and UDP sockets are bound to this thread's namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("realtime: netlink: %w", err)
	}
	l.nl = h
	l.routes.Store(&map[netip.Addr]bool{{}: l.lookupClass(netip.Addr{})})
	for fam, af := range []int{unix.AF_INET, unix.AF_INET6} {
		for kind := 0; kind < 2; kind++ {
			fd, err := openSender(af, kind == 1)
			if err != nil {
				if fam == 1 {
					l.log.Info("realtime: no IPv6 sender", "err", err)
					break
				}
				return nil, err
			}
			l.tx[fam][kind] = fd
		}
	}
	if l.netns, l.attachOK = attachProbe(l.tx[0][0]); !l.attachOK {
		l.log.Info("realtime: clients' own sockets unsupported here (SO_PRIORITY control messages need Linux 6.14, SO_NETNS_COOKIE 5.14); their datagrams leave from the lane's")
	}
	if l.rate.Load() == 0 {
		l.rate.Store(l.autoRate())
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Socket), 0o755); err != nil {
		return nil, fmt.Errorf("realtime socket dir: %w", err)
	}
	if fi, err := os.Lstat(cfg.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if peerLive(cfg.Socket) {
			return nil, fmt.Errorf("realtime: %s: another daemon is listening there", cfg.Socket)
		}
		_ = os.Remove(cfg.Socket) // stale socket of an earlier run
	}
	lfd, err := listenSeqpacket(cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("realtime: listen %s: %w", cfg.Socket, err)
	}
	l.lfd = lfd
	// Anyone may connect; grants are checked per peer with SO_PEERCRED.
	if err := os.Chmod(cfg.Socket, 0o666); err != nil {
		return nil, fmt.Errorf("realtime: chmod %s: %w", cfg.Socket, err)
	}
	if l.helper != "" {
		p, err := l.startHelper()
		if err != nil {
			return nil, err
		}
		l.rtd.Store(p)
	}
	ok = true
	return l, nil
}

// listenSeqpacket opens a blocking SOCK_SEQPACKET listener: connections
// and their reads use plain blocking syscalls on their own threads, so a
// request wakes the thread that admits it directly (no netpoller hop).
func listenSeqpacket(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openSender opens an unconnected, blocking UDP socket (sends are plain
// syscalls on the releaser's thread, never a wait in Go's netpoller); class
// selects SO_PRIORITY = the realtime classid (needs CAP_NET_ADMIN) rather
// than TC_PRIO_INTERACTIVE. A large send buffer and a 2 ms send timeout:
// datagrams stay charged to the socket until the device frees them.
func openSender(af int, class bool) (int, error) {
	fd, err := unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("realtime: UDP socket (family %d): %w", af, err)
	}
	prio := 6 // TC_PRIO_INTERACTIVE
	if class {
		prio = int(lane.Realtime.ClassID())
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PRIORITY, prio); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("realtime: SO_PRIORITY %#x: %w", prio, err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	}
	tv := unix.NsecToTimeval(2_000_000)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	return fd, nil
}

// autoRate reads the link speed of the default route's device from sysfs.
func (l *Lane) autoRate() uint64 {
	const fallback = 1_000_000_000
	routes, err := l.nl.RouteList(nil, unix.AF_INET)
	if err != nil {
		return fallback
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		link, err := l.nl.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/sys/class/net/" + link.Attrs().Name + "/speed")
		if err != nil {
			continue
		}
		if mbit, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && mbit > 0 {
			return uint64(mbit) * 1_000_000
		}
	}
	return fallback
}

// SetRate changes the link rate used for transmit times (bit/s), e.g. to a
// shaped uplink rate; 0 is ignored.
func (l *Lane) SetRate(bps uint64) {
	if bps > 0 {
		l.rate.Store(bps)
		if p := l.rtd.Load(); p != nil {
			_ = l.sendConfig(p)
		}
	}
}

// Rate is the link rate in use, bit/s.
func (l *Lane) Rate() uint64 { return l.rate.Load() }

// Addr is the unix socket path.
func (l *Lane) Addr() string { return l.cfg.Socket }

// bytesNs converts bytes to ns at the current rate, rounding up.
func (l *Lane) bytesNs(n int64) int64 {
	r := int64(l.rate.Load())
	return (n*8*1_000_000_000 + r - 1) / r
}

// Run serves clients and releases datagrams until ctx ends or Close.
//
// Note: the releaser and the granted clients' readers are locked to their
// own (SCHED_FIFO) threads and block in plain syscalls. A thread coming back
// from a syscall needs one of Go's Ps; if every P is busy with ordinary
// goroutines it waits for the Go scheduler, whatever its kernel priority.
// The lane therefore keeps more Ps than CPUs, one per realtime thread on
// top of a spare (procs.go), so the kernel scheduler, which honours
// SCHED_FIFO, decides.
func (l *Lane) Run(ctx context.Context) error {
	if !l.started.CompareAndSwap(false, true) {
		return errors.New("realtime: Run called twice")
	}
	defer close(l.runDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var helperErr error
	if p := l.rtd.Load(); p != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.serveHelper(ctx, p); ctx.Err() == nil && !l.isClosed() {
				helperErr = err
				cancel() // the lane ends; the daemon restarts it
			}
		}()
		if p.trace != nil {
			wg.Add(1)
			go func() { defer wg.Done(); l.readTrace(p) }()
		}
	} else {
		l.ensureProcs()
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.release(ctx)
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.followClients(ctx)
	}()
	go func() {
		defer wg.Done()
		l.refreshRoutes(ctx, 2*time.Second)
	}()
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
	l.connMu.Lock()
	l.closed = true
	for c := range l.conns {
		if c.fd >= 0 {
			_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // wakes its reader
		}
	}
	l.connMu.Unlock()
	if l.rtd.Load() != nil {
		_ = l.rtd.Load().stop()
	}
	wg.Wait()
	if l.rtd.Load() != nil {
		l.rtd.Load().close()
		for id := range l.handed {
			l.helperClosed(id)
		}
	}
	l.flush()
	return errors.Join(err, helperErr)
}

// DataPath names where the data path runs: "lanes-rtd" (a process of its
// own, rtd.go) or "in-process".
func (l *Lane) DataPath() string {
	if l.helper != "" {
		return HelperName
	}
	return "in-process"
}

func (l *Lane) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close stops Run (if running), waits for it and releases the sockets.
func (l *Lane) Close() error {
	var err error
	l.closeMu.Do(func() {
		close(l.done)
		if l.started.Load() {
			<-l.runDone
		} else if p := l.rtd.Load(); p != nil {
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
		// The socket file is ours (New bound it).
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
	if l.efd >= 0 {
		unix.Close(l.efd)
		l.efd = -1
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

// flush drops whatever is still queued when Run ends, counting it.
func (l *Lane) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.q.Len() > 0 {
		p, _, _ := l.q.Pop(0)
		pk := l.pend[p.ID]
		delete(l.pend, p.ID)
		l.totals.DroppedLate++
		l.flow(pk.key).DroppedLate++
		if pk.s != nil {
			pk.s.put()
			pk.s = nil
		}
	}
}

// Bounds of the per-flow counters, which any local user can make grow
// (rejected requests count too): beyond maxFlowsPerUID a uid's further flows
// share its flow ^0, beyond maxFlows every new flow shares (^0, ^0).
const (
	maxFlowsPerUID = 64
	maxFlows       = 4096
)

// flow returns the flow's counters; l.mu held.
func (l *Lane) flow(k flowKey) *FlowStats {
	if f := l.flows[k]; f != nil {
		return f
	}
	switch {
	case len(l.flows) >= maxFlows:
		k = flowKey{^uint32(0), ^uint32(0)}
	case l.uidFlows[k.uid] >= maxFlowsPerUID:
		k.flow = ^uint32(0)
	}
	f := l.flows[k]
	if f == nil {
		f = &FlowStats{UID: k.uid, Flow: k.flow, Counters: Counters{MinMarginNs: 1<<63 - 1}}
		l.flows[k] = f
		l.uidFlows[k.uid]++
	}
	return f
}

// Stats returns a copy of the counters.
func (l *Lane) Stats() Snapshot {
	cs := l.connCounters() // before the spin lock: connMu may sleep
	s := l.ownStats(cs)
	if p := l.rtd.Load(); p != nil {
		h, err := l.helperStats(p)
		if err != nil {
			s.Error = err.Error()
		}
		s.merge(h)
	}
	return s
}

// ownStats are the counters of this process's data path: all of them
// in-process, the refusals of ungranted clients with lanes-rtd.
func (l *Lane) ownStats(cs connStats) Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Snapshot{RateBps: l.Rate(), Depth: l.q.Len(), BacklogNs: l.q.Backlog(), Totals: l.totals,
		connStats: cs, DataPath: l.DataPath()}
	for _, f := range l.flows {
		c := *f
		if f.Rejects != nil {
			c.Rejects = make(map[string]uint64, len(f.Rejects))
			for k, v := range f.Rejects {
				c.Rejects[k] = v
			}
		}
		s.Flows = append(s.Flows, c)
	}
	sort.Slice(s.Flows, func(i, j int) bool {
		if s.Flows[i].UID != s.Flows[j].UID {
			return s.Flows[i].UID < s.Flows[j].UID
		}
		return s.Flows[i].Flow < s.Flows[j].Flow
	})
	return s
}

// admit runs the admission test for one request; it returns the reply.
// It may run pinned (pin.go): what may block is left in a for afterwards.
func (l *Lane) admit(c *conn, r *wire.Request, a *after) wire.Reply {
	now := Monotonic()
	rep := wire.Reply{Type: wire.TypeReject, Flow: r.Flow, Seq: r.Seq}
	key := flowKey{c.uid, r.Flow}
	reason := l.refusal(c, r)
	deadline := int64(r.Deadline)
	if r.Flags&wire.FlagRelative != 0 {
		deadline = now + int64(r.Deadline)*1000
	}
	tx := l.bytesNs(int64(len(r.Payload)) + int64(l.cfg.Overhead))
	var pk *pending
	if reason == wire.ReasonNone { // allocate outside the lock
		pk = getPending()
		*pk = pending{c: c, key: key, seq: r.Seq, dst: r.Dst, payload: append(pk.payload[:0], r.Payload...), deadline: deadline}
		if r.Sock > 0 {
			pk.s = c.socks[r.Sock-1]
			pk.s.refs.Add(1)
		}
		l.classFor(pk.to()) // queues a new destination's lookup before its release
	}

	l.mu.Lock()
	if reason == wire.ReasonNone && l.q.Len() >= l.cfg.MaxQueue {
		reason = wire.ReasonQueueFull
	}
	tnow := max(now, l.busyUntil) + l.bytesNs(l.reserve)
	var id uint64
	if reason == wire.ReasonNone {
		l.nextID++
		id = l.nextID
		d := l.q.Admit(tnow, edf.Packet{ID: id, Deadline: deadline, Tx: tx})
		switch {
		case d.OK:
			l.pend[id] = pk
			rep.Type = wire.TypeAdmit
		case d.Reason == edf.Displaces:
			reason = wire.ReasonDisplaces
		default:
			reason = wire.ReasonOwnDeadline
		}
	}
	l.countLocked(key, rep.Type == wire.TypeAdmit, reason)
	rep.Reason = reason
	rep.Depth = uint32(l.q.Len())
	if s, ok := l.q.Slack(tnow); ok {
		rep.Slack = s
	}
	// Direct release: when the releaser sleeps on an empty queue and this
	// datagram is all there is, send it from this (already running, RT)
	// thread rather than waking the releaser — one thread wake-up less on
	// the path (docs/realtime.md). One sender at a time: l.sending.
	var direct popped
	if rep.Type == wire.TypeAdmit && l.releaserIdle && !l.sending && l.q.Len() == 1 {
		if direct, _ = l.popHead(Monotonic()); direct.pk != nil {
			l.sending = true
		}
	}
	l.mu.Unlock()
	rep.Time = uint64(now)
	if rep.Type == wire.TypeAdmit && direct.pk == nil {
		l.kick()
	} else if pk != nil && rep.Type != wire.TypeAdmit {
		putPending(pk)
	}
	if l.trace != nil {
		k := EvAdmit
		if rep.Type != wire.TypeAdmit {
			k = EvReject
		}
		a.trace(l, Event{Kind: k, Time: now, UID: c.uid, Flow: r.Flow, Seq: r.Seq, Deadline: deadline, Tx: tx, Reason: reason})
	}
	if direct.pk != nil {
		l.finish(direct, true, a)
	}
	return rep
}

// refusal is why request r on connection c is refused before the
// admission test (not granted, lane disabled, too big, bad destination),
// or wire.ReasonNone.
func (l *Lane) refusal(c *conn, r *wire.Request) uint8 {
	switch {
	case !c.granted:
		return wire.ReasonNotGranted
	case !l.cfg.Enabled:
		return wire.ReasonDisabled
	case len(r.Payload) > wire.MaxPayload:
		return wire.ReasonTooBig
	case r.Sock > 0:
		return c.sockRefusal(r)
	case !r.Dst.IsValid() || r.Dst.Port() == 0 || r.Dst.Addr().IsUnspecified():
		return wire.ReasonBadDest
	case r.Dst.Addr().Is6() && l.tx[1][0] < 0:
		return wire.ReasonBadDest
	}
	return wire.ReasonNone
}

// countLocked counts one decision for flow key and in the totals: an
// admission, or a rejection by its reason. l.mu is held.
func (l *Lane) countLocked(key flowKey, admitted bool, reason uint8) {
	f := l.flow(key)
	if admitted {
		f.Admitted++
		l.totals.Admitted++
		return
	}
	f.Rejected++
	l.totals.Rejected++
	if f.Rejects == nil {
		f.Rejects = map[string]uint64{}
	}
	f.Rejects[wire.ReasonString(reason)]++
}

// kick wakes the releaser. An eventfd and not a channel: the releaser is a
// locked thread blocked in ppoll, and a channel send would only make it
// runnable in Go's scheduler, which may leave it waiting for a P for
// milliseconds; the kernel wakes the thread at once.
// Raw: the admitting thread may be pinned (pin.go); the eventfd never
// blocks (EFD_NONBLOCK).
func (l *Lane) kick() { rawWrite8(l.efd, 1) }

// wait blocks until kicked or until the monotonic time until (0: no limit).
func (l *Lane) wait(until int64) {
	fds := []unix.PollFd{{Fd: int32(l.efd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if until > 0 {
		d := until - Monotonic()
		if d <= 0 {
			return
		}
		t := unix.NsecToTimespec(d)
		ts = &t
	}
	if n, _ := unix.Ppoll(fds, ts, nil); n > 0 {
		var b [8]byte
		_, _ = unix.Read(l.efd, b[:])
	}
}

// release is the single goroutine that paces and sends. It owns its OS
// thread (raised to SCHED_FIFO when configured, so busy normal-priority
// tasks cannot delay releases) and waits in ppoll on an eventfd with a
// nanosecond timeout rather than on Go timers and channels, so the kernel
// wakes exactly this thread on time.
func (l *Lane) release(ctx context.Context) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if prio := l.cfg.ReleasePriority; prio > 0 {
		if err := setThreadFIFO(0, prio); err != nil {
			l.log.Warn("realtime: releaser stays at normal priority", "priority", prio, "err", err)
		}
	}
	defer kickOnDone(ctx, l.kick)()
	var a after
	for ctx.Err() == nil {
		if until, ok := l.releaseOne(&a); !ok {
			l.wait(until)
		}
		l.afterwards(&a)
	}
}

// kickOnDone runs kick when ctx is done. The function it returns waits
// for a kick already started: Close closes the eventfd after Run returns,
// and a kick still in flight would then write to a closed descriptor, or
// to whatever file reused its number.
func kickOnDone(ctx context.Context, kick func()) (stop func()) {
	kicked := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() { kick(); close(kicked) })
	return func() {
		if !stopAfter() {
			<-kicked
		}
	}
}

// releaseOne sends the queue's head if pacing allows, pinned (pin.go); if
// there is nothing to send it returns when to look again (0: when kicked).
func (l *Lane) releaseOne(a *after) (until int64, sent bool) {
	pinHot()
	defer unpinHot()
	l.mu.Lock()
	if l.q.Len() == 0 || l.sending {
		// Empty: admitting threads may release directly until we are
		// kicked. A direct release in flight: keep to one sender at a
		// time (wire order = EDF order) and look again shortly.
		empty := l.q.Len() == 0
		l.releaserIdle = empty
		l.mu.Unlock()
		if empty {
			return 0, false
		}
		return Monotonic() + 10_000, false
	}
	l.releaserIdle = false
	r, until := l.popHead(Monotonic())
	l.mu.Unlock()
	if r.pk == nil {
		return until, false
	}
	l.finish(r, false, a)
	return 0, true
}

// popped is a datagram taken off the queue for release.
type popped struct {
	pk   *pending
	p    edf.Packet
	f    *FlowStats
	now  int64
	late bool
	err  error // the send's
}

// popHead takes the head off the queue if pacing allows a release at now;
// otherwise it returns the time to try again. Called with l.mu held.
func (l *Lane) popHead(now int64) (popped, int64) {
	head, _ := l.q.Peek()
	// Release only while the kernel's realtime backlog, this datagram
	// included, stays within the bound (always when it is empty).
	if ahead := l.busyUntil - now + head.Tx - l.bytesNs(l.bound); ahead > 0 && l.busyUntil > now {
		return popped{}, now + ahead
	}
	tnow := max(now, l.busyUntil) + l.bytesNs(l.reserve)
	p, late, _ := l.q.Pop(tnow)
	pk := l.pend[p.ID]
	delete(l.pend, p.ID)
	r := popped{pk: pk, p: p, f: l.flow(pk.key), now: now, late: late}
	if late {
		r.f.DroppedLate++
		l.totals.DroppedLate++
		return r, 0
	}
	l.busyUntil = max(now, l.busyUntil) + p.Tx
	margin := p.Deadline - (tnow + p.Tx)
	r.f.MinMarginNs = min(r.f.MinMarginNs, margin)
	l.totals.MinMarginNs = min(l.totals.MinMarginNs, margin)
	return r, 0
}

// finish sends a popped datagram and counts the outcome; a late one, or
// one whose send failed, is left in a to be reported. direct says an
// admitting thread released it, whose turn as the sender ends here.
// Called without l.mu, possibly pinned.
func (l *Lane) finish(r popped, direct bool, a *after) {
	pk, p := r.pk, r.p
	var err error
	if !r.late {
		a.trace(l, Event{Kind: EvRelease, Time: r.now, UID: pk.key.uid, Flow: pk.key.flow, Seq: pk.seq, Deadline: p.Deadline, Tx: p.Tx})
		err = l.send(pk)
	}
	n := uint64(len(pk.payload))
	l.mu.Lock()
	switch {
	case r.late:
	case err != nil:
		r.f.SendErrors++
		l.totals.SendErrors++
		l.busyUntil -= p.Tx
	default:
		r.f.Sent++
		r.f.SentBytes += n
		l.totals.Sent++
		l.totals.SentBytes += n
	}
	if direct {
		l.sending = false
	}
	l.mu.Unlock()
	if r.late || err != nil {
		r.err = err
		a.drop = r
		return
	}
	putPending(pk)
}

// report tells a popped datagram's client that it was not sent, and
// recycles it. Called unpinned.
func (l *Lane) report(r popped) {
	reason := uint8(wire.ReasonLate)
	if !r.late {
		reason = wire.ReasonSendError
		l.log.Debug("realtime: send failed", "dst", r.pk.dst, "err", r.err)
	}
	l.dropped(r.pk, r.p, r.now, reason)
	putPending(r.pk)
}

func (l *Lane) dropped(pk *pending, p edf.Packet, now int64, reason uint8) {
	if l.trace != nil {
		l.trace(Event{Kind: EvDrop, Time: now, UID: pk.key.uid, Flow: pk.key.flow, Seq: pk.seq, Deadline: p.Deadline, Tx: p.Tx, Reason: reason})
	}
	pk.c.notify(wire.Reply{Type: wire.TypeDropped, Reason: reason, Flow: pk.key.flow, Seq: pk.seq, Time: uint64(now)})
}

// to is where the datagram goes: its destination, or its socket's peer.
func (pk *pending) to() netip.Addr {
	if !pk.dst.IsValid() && pk.s != nil {
		return pk.s.peer.Addr()
	}
	return pk.dst.Addr()
}

// send writes the datagram from the client's socket with the priority
// that suits the egress device of its destination, or from the lane's
// socket of that priority.
func (l *Lane) send(pk *pending) error {
	if pk.s != nil {
		prio := uint32(6) // TC_PRIO_INTERACTIVE: see the package's note
		if l.classFor(pk.to()) {
			prio = lane.Realtime.ClassID()
		}
		if corked(pk.s.fd) {
			return errCorked
		}
		for {
			if err := sendOn(pk.s, pk.payload, pk.dst, prio, 0); err != unix.EINTR {
				return err
			}
		}
	}
	fam := 0
	if pk.dst.Addr().Is6() {
		fam = 1
	}
	kind := 0
	if l.classFor(pk.dst.Addr()) {
		kind = 1
	}
	for {
		err := sendTo(l.tx[fam][kind], pk.payload, pk.dst)
		if err != unix.EINTR {
			return err
		}
	}
}

// classFor reports whether the destination's egress device has a lanes HTB
// root, so that SO_PRIORITY = 1:11 selects the realtime leaf. It only reads
// the snapshot: a destination not in it yet is queued for the refresher and
// answered with the guess for the default route's device (stored under the
// zero Addr), which is right whenever one interface is managed.
func (l *Lane) classFor(a netip.Addr) bool {
	m := *l.routes.Load()
	if c, ok := m[a]; ok {
		return c
	}
	select {
	case l.lookups <- a:
	default: // refresher busy: it will be asked again by the next datagram
	}
	return m[netip.Addr{}]
}

// lookupClass asks the kernel: route to a, its device, the device's root
// qdisc. For the zero Addr (the guess for destinations not resolved yet):
// whether any device has the lanes tree.
func (l *Lane) lookupClass(a netip.Addr) bool {
	var links []netlink.Link
	if a.IsValid() {
		rs, err := l.nl.RouteGet(a.AsSlice())
		if err != nil || len(rs) == 0 {
			return false
		}
		link, err := l.nl.LinkByIndex(rs[0].LinkIndex)
		if err != nil {
			return false
		}
		links = []netlink.Link{link}
	} else {
		var err error
		if links, err = l.nl.LinkList(); err != nil {
			return false
		}
	}
	for _, link := range links {
		qs, err := l.nl.QdiscList(link)
		if err != nil {
			continue
		}
		for _, q := range qs {
			at := q.Attrs()
			if at.Parent == netlink.HANDLE_ROOT && at.Handle == uint32(lane.RootMajor)<<16 && q.Type() == "htb" {
				return true
			}
		}
	}
	return false
}

// tellHelper passes a destination's class on to lanes-rtd, if it runs.
func (l *Lane) tellHelper(a netip.Addr, c bool) {
	if p := l.rtd.Load(); p != nil {
		_ = l.sendRoute(p, a, c)
	}
}

// setRoute publishes one answer in a new snapshot; false if it was known.
func (l *Lane) setRoute(a netip.Addr, c bool) bool {
	l.routeMu.Lock()
	defer l.routeMu.Unlock()
	old := *l.routes.Load()
	if v, ok := old[a]; ok && v == c {
		return false
	}
	m := make(map[netip.Addr]bool, len(old)+1)
	if len(old) < 4096 {
		for k, v := range old {
			m[k] = v
		}
	}
	m[a] = c
	l.routes.Store(&m)
	return true
}

// refreshRoutes answers lookups for new destinations and re-resolves every
// known one each interval, so a lanes tree installed or removed later is
// followed. It runs at normal priority: netlink dumps take the RTNL lock.
func (l *Lane) refreshRoutes(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-l.lookups:
			c, ok := (*l.routes.Load())[a]
			if !ok {
				c = l.lookupClass(a)
				l.setRoute(a, c)
			}
			l.tellHelper(a, c)
		case <-t.C:
			for a := range *l.routes.Load() {
				if c := l.lookupClass(a); l.setRoute(a, c) {
					l.tellHelper(a, c)
				}
			}
		}
	}
}
