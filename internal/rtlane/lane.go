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

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

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
	// Helper: lanes-rtd's own figures (its memory, allocations, full
	// sockets); absent without it.
	Helper *HelperStats `json:"helper,omitempty"`
	connStats
}

// HelperStats are lanes-rtd's own figures.
type HelperStats struct {
	// PoolBytes is the payload pool (max_queue_bytes), allocated once;
	// PoolFree what of it no queued datagram holds.
	PoolBytes uint64 `json:"pool_bytes"`
	PoolFree  uint64 `json:"pool_free"`
	// Allocs counts lanes-rtd's allocations since it started: at start,
	// per connection and per STATS reply it could not send at once, never
	// per request.
	Allocs uint64 `json:"allocs"`
	// SendFull counts datagrams a full socket refused (EAGAIN): dropped
	// with send-error, never waited for.
	SendFull uint64 `json:"send_full"`
}

type flowKey struct{ uid, flow uint32 }

// Lane is the realtime lane. New, then Run; Close stops it.
type Lane struct {
	cfg   Config
	log   *slog.Logger
	lfd   int // listening unix socket, -1 when closed
	lfdMu sync.Mutex
	nl    *netlink.Handle
	tx    [2][2]int     // UDP sockets [v4|v6][plain|class] lanes-rtd sends from, -1 = none
	rate  atomic.Uint64 // bit/s
	trace func(Event)

	// This process's counters: ungranted clients' refusals.
	mu       sync.Mutex
	flows    map[flowKey]*FlowStats
	uidFlows map[uint32]int // flows entries per uid (bounded: flow)
	totals   Counters

	connMu       sync.Mutex // conns, perUID, others, closed, handed, nextConn (conn.go)
	conns        map[*conn]struct{}
	perUID       map[uint32]int
	others       int // connections of clients neither root nor granted
	closed       bool
	wake         wakeState // the PM QoS request while granted clients are connected (wake.go)
	refusedConns atomic.Uint64
	acceptErrors atomic.Uint64
	// Clients' own sockets: whether this kernel and namespace allow them
	// and the namespace's cookie they must have (lanes-rtd checks).
	attachOK bool
	netns    uint64

	done      chan struct{}
	closeOnce sync.Once
	started   atomic.Bool
	runDone   chan struct{}

	// Which destinations leave through a device with the lanes tree: an
	// immutable snapshot, looked up for lanes-rtd by a goroutine at normal
	// priority and refreshed every 2 s. Netlink dumps take the RTNL lock,
	// which namespace churn elsewhere can hold for tens of milliseconds:
	// never on lanes-rtd's path, which meanwhile uses the guess.
	routeMu sync.Mutex // serializes writers of routes
	routes  atomic.Pointer[map[netip.Addr]bool]
	lookups chan netip.Addr // new destinations for the refresher

	// The data path process (rtd.go): its executable, the running process,
	// the connections handed to it by id and the priority it was given.
	helper string
	rtd    *rtdProc
	// lanes-rtd's counters as last asked for a client (clientStats).
	statsMu     sync.Mutex
	statsAt     time.Time
	statsHelper Snapshot
	statsErr    error
	handed      map[uint32]*conn
	nextConn    uint32
	helperPrio  int
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
func New(cfg Config, opts ...Option) (*Lane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("realtime config: %w", err)
	}
	l := &Lane{
		cfg: cfg, log: slog.Default(), lfd: -1, tx: [2][2]int{{-1, -1}, {-1, -1}},
		flows: map[flowKey]*FlowStats{}, uidFlows: map[uint32]int{},
		conns: map[*conn]struct{}{}, perUID: map[uint32]int{}, handed: map[uint32]*conn{},
		done: make(chan struct{}), runDone: make(chan struct{}),
		totals: Counters{MinMarginNs: 1<<63 - 1}, helper: FindHelper(),
	}
	for _, o := range opts {
		o(l)
	}
	if l.helper == "" {
		return nil, ErrNoHelper
	}
	l.rate.Store(cfg.Rate.Bits())
	l.lookups = make(chan netip.Addr, 64)
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
	p, err := l.startHelper()
	if err != nil {
		return nil, err
	}
	l.rtd = p
	ok = true
	return l, nil
}

// openNetwork opens the netlink handle and the sending sockets, which are
// bound to this thread's namespace, and probes what the clients' own
// sockets need.
func (l *Lane) openNetwork() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("realtime: netlink: %w", err)
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
				return err
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
	return nil
}

// listen binds the clients' socket (0666: grants are checked per peer
// with SO_PEERCRED), replacing a stale one, never a live daemon's.
func (l *Lane) listen() error {
	path := l.cfg.Socket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("realtime socket dir: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if peerLive(path) {
			return fmt.Errorf("realtime: %s: another daemon is listening there", path)
		}
		_ = os.Remove(path) // stale socket of an earlier run
	}
	lfd, err := listenSeqpacket(path)
	if err != nil {
		return fmt.Errorf("realtime: listen %s: %w", path, err)
	}
	l.lfd = lfd
	if err := os.Chmod(path, 0o666); err != nil {
		return fmt.Errorf("realtime: chmod %s: %w", path, err)
	}
	return nil
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

// openSender opens an unconnected UDP socket for lanes-rtd; class selects
// SO_PRIORITY = the realtime classid (needs CAP_NET_ADMIN) rather than
// TC_PRIO_INTERACTIVE. A large send buffer: datagrams stay charged to the
// socket until the device frees them. lanes-rtd sends with MSG_DONTWAIT
// and never waits for room (a full socket fails that datagram, counted).
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
		if p := l.rtd; p != nil {
			_ = l.sendConfig(p)
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
		if err := l.serveHelper(p); ctx.Err() == nil && !l.isClosed() {
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
		l.refreshRoutes(ctx, 2*time.Second)
	}()
	if p.trace != nil {
		wg.Add(1)
		go func() { defer wg.Done(); l.readTrace(p) }()
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
	l.connMu.Lock()
	l.closed = true
	for c := range l.conns {
		if c.fd >= 0 {
			_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // wakes its reader
		}
	}
	l.connMu.Unlock()
	_ = p.stop()
	wg.Wait()
	p.close()
	l.connMu.Lock()
	ids := make([]uint32, 0, len(l.handed))
	for id := range l.handed {
		ids = append(ids, id)
	}
	l.connMu.Unlock()
	for _, id := range ids {
		l.helperClosed(id)
	}
	return errors.Join(err, helperErr)
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

// Stats returns a copy of the counters: lanes-rtd's and this process's.
func (l *Lane) Stats() Snapshot {
	s := l.ownStats(l.connCounters())
	if l.rtd == nil { // not started (tests of the counters alone)
		return s
	}
	h, err := l.helperStats(l.rtd)
	if err != nil {
		s.Error = err.Error()
	}
	s.merge(h)
	return s
}

// statsCacheAge is how long lanes-rtd's counters answer the STATS of
// clients other than root: a client looping STATS (11,800/s seen) then
// asks lanes-rtd at most 10 times a second, not once per request.
const statsCacheAge = 100 * time.Millisecond

// clientStats is Stats for a client's STATS request: fresh for root, for
// other clients with lanes-rtd's part at most statsCacheAge old.
func (l *Lane) clientStats(uid uint32) Snapshot {
	if uid == 0 || l.rtd == nil {
		return l.Stats()
	}
	s := l.ownStats(l.connCounters())
	l.statsMu.Lock()
	if l.statsAt.IsZero() || time.Since(l.statsAt) > statsCacheAge {
		l.statsHelper, l.statsErr = l.helperStats(l.rtd)
		l.statsAt = time.Now()
	}
	h, err := l.statsHelper, l.statsErr
	l.statsMu.Unlock()
	if err != nil {
		s.Error = err.Error()
	}
	s.merge(h)
	return s
}

// ownStats are this process's counters (ungranted clients' refusals) and
// connection counters.
func (l *Lane) ownStats(cs connStats) Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Snapshot{RateBps: l.Rate(), Totals: l.totals, connStats: cs, DataPath: l.DataPath()}
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
	sortFlows(s.Flows)
	return s
}

// sortFlows orders flows by uid, then flow.
func sortFlows(fs []FlowStats) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].UID != fs[j].UID {
			return fs[i].UID < fs[j].UID
		}
		return fs[i].Flow < fs[j].Flow
	})
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
	if p := l.rtd; p != nil {
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

// forgetRoute drops a destination lanes-rtd no longer holds (unused, or
// displaced): it is not re-resolved any more.
func (l *Lane) forgetRoute(a netip.Addr) {
	l.routeMu.Lock()
	defer l.routeMu.Unlock()
	old := *l.routes.Load()
	if _, ok := old[a]; !ok || !a.IsValid() {
		return
	}
	m := make(map[netip.Addr]bool, len(old))
	for k, v := range old {
		if k != a {
			m[k] = v
		}
	}
	l.routes.Store(&m)
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
