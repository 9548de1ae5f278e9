// Package tcpmon is lanes' kernel TCP monitor: it samples every TCP socket's
// congestion state through sock_diag netlink (cwnd, ssthresh, RTTs, CA state,
// losses, byte counters, rates, queues), attributes each socket to its lane
// and owning process, and, in event mode, follows per-ACK congestion-window
// updates and flow starts and ends through BPF tracepoints.
//
// sampler.go is the sampling loop:
//   - New opens one sock_diag socket (inside Config's network namespace).
//   - Sample dumps IPv4 and IPv6 TCP sockets, filters them, resolves process
//     and lane, and computes throughput from the bytes_acked difference to the
//     previous sample of the same socket (keyed by socket cookie).
//   - Run calls Sample every Interval until the context ends.
//
// Note: ports and cgroup are also compiled into inet_diag bytecode, so the
// kernel does not fill tcp_info for sockets that cannot match (the costly
// part of a dump); every condition is checked again in user space, which
// keeps the answer right on kernels that refuse or lack a bytecode op.
package tcpmon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/lane"
)

// MinInterval is the shortest sampling interval accepted.
const MinInterval = 10 * time.Millisecond

// DefaultInterval is the sampling interval when none is given.
const DefaultInterval = 100 * time.Millisecond

// Filter selects flows; zero fields match everything. All set fields must
// match.
type Filter struct {
	Lanes      []lane.Lane  // flow's lane is one of these
	Local      netip.Prefix // local address within
	Remote     netip.Prefix // remote address within
	LocalPort  uint16
	RemotePort uint16
	Port       uint16 // either side's port
	PID        int    // owning process id
	Comm       string // owning process name (as in /proc/PID/comm)
	Cgroup     string // cgroup v2 directory the socket was created in
	CgroupID   uint64 // or its id (the directory's inode number)
}

// Config configures a Sampler.
type Config struct {
	Interval time.Duration // default DefaultInterval, at least MinInterval
	// NetNSPath or NetNS selects the network namespace to sample; both
	// empty means the caller's. NetNS is borrowed, not closed.
	NetNSPath string
	NetNS     netns.NsHandle
	Filter    Filter
	// LaneOf maps a socket cookie to its lane (the datapath's sockops map).
	// nil: lanes are reported as unset. A cookie it does not know is in the
	// default lane, interactive.
	LaneOf func(cookie uint64) (lane.Lane, bool)
	States uint32 // idiag_states mask; 0 = ConnectedStates
	// NoProcess skips the socket -> process lookup (saves the /proc scans).
	NoProcess bool
	// ProcRefresh is the least time between two /proc scans (default 1 s):
	// a new socket's process is known at most this late (in the tracked
	// mode, at the socket's first visit after that: its next activity, or
	// the full walk for an idle one).
	ProcRefresh time.Duration
	IPv4Only    bool
	// Backend: "" picks the tracked mode when it loads, else the cheaper
	// of the BPF iterator and sock_diag; BackendTrack, BackendIter or
	// BackendDiag force one (a forced BPF backend that does not load is an
	// error).
	Backend string
	// LaneMap is the daemon's socket cookie -> lane map (the datapath's
	// lanes_cookie): with it the iterator resolves lanes in the kernel,
	// one map lookup per socket without a system call.
	LaneMap *ebpf.Map
	// prefetch: which variant of the iterator's walk programs loads
	// (tcpiter.Config.Prefetch; tests load each).
	prefetch tcpiter.Prefetch
}

// Sampler takes samples of TCP sockets. It is not safe for concurrent use:
// one goroutine samples (Run), others get copies of the flows.
type Sampler struct {
	cfg   Config
	track *trackSource // tracked mode, nil: not in use
	iter  *iterSource  // loaded iterator, nil: sock_diag only
	use   bool         // sample through iter
	why   string       // why this backend
	nsH   netns.NsHandle
	conn  *diagConn
	procs *procCache
	known map[uint64]*prevCounters // by socket cookie
	gen   uint64                   // sample number, to sweep vanished sockets
	prevT time.Time                // time of the previous sample
	buf   []Flow
	// Stats of the last Sample.
	Dumped, Matched int
}

// prevCounters is what the sampler remembers of a socket between samples:
// its counters for rates, and its formatted addresses and congestion
// control name, so a stable socket costs no string allocations.
type prevCounters struct {
	gen          uint64 // last sample that saw the socket
	t            time.Time
	acked, recvd uint64
	src, dst     string
	cong         string
	proc         Proc
	procGen      int // procCache scan the owner was looked up in (-1: ask again)
}

func (c *Config) validate() error {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Interval < MinInterval {
		return fmt.Errorf("interval %v is below the minimum %v", c.Interval, MinInterval)
	}
	if c.States == 0 {
		c.States = ConnectedStates
	}
	if c.ProcRefresh == 0 {
		c.ProcRefresh = time.Second
	}
	if c.Filter.Cgroup != "" && c.Filter.CgroupID == 0 {
		var st unix.Stat_t
		if err := unix.Stat(c.Filter.Cgroup, &st); err != nil {
			return fmt.Errorf("cgroup filter %s: %w", c.Filter.Cgroup, err)
		}
		c.Filter.CgroupID = st.Ino
	}
	if c.Backend != "" && c.Backend != BackendTrack && c.Backend != BackendIter && c.Backend != BackendDiag {
		return fmt.Errorf("backend %q: want %s, %s or %s", c.Backend, BackendTrack, BackendIter, BackendDiag)
	}
	if len(c.Filter.Lanes) > 0 && c.LaneOf == nil && c.LaneMap == nil {
		return errors.New("a lane filter needs the lane map (is the daemon running?)")
	}
	if (c.Filter.PID != 0 || c.Filter.Comm != "") && c.NoProcess {
		return errors.New("a process filter needs the process lookup")
	}
	return nil
}

// New opens a sampler. Close it when done.
func New(cfg Config) (*Sampler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ns := cfg.NetNS
	// owned is the handle New opened itself (NetNSPath) and Close closes;
	// None (-1), not the zero value: NsHandle(0).IsOpen() is true, and
	// closing it closed fd 0, whichever socket held that number by then.
	owned := netns.None()
	if cfg.NetNSPath != "" {
		h, err := netns.GetFromPath(cfg.NetNSPath)
		if err != nil {
			return nil, fmt.Errorf("network namespace %s: %w", cfg.NetNSPath, err)
		}
		ns, owned = h, h
	} else if ns == 0 {
		ns = netns.None()
	}
	conn, err := openDiag(ns)
	if err != nil {
		owned.Close()
		return nil, err
	}
	f := &cfg.Filter
	conn.bytecode = diagFilter(f.LocalPort, f.RemotePort, f.Port, f.CgroupID)
	s := &Sampler{cfg: cfg, conn: conn, known: map[uint64]*prevCounters{}, nsH: owned}
	switch {
	case cfg.Backend == BackendDiag:
		s.why = "sock_diag asked for"
	case cfg.States&^ConnectedStates != 0:
		// LISTEN (whose queues sock_diag reports as the accept backlog)
		// and TIME-WAIT: sock_diag only.
		s.why = "listening or TIME-WAIT sockets asked for"
		if cfg.Backend == BackendIter {
			s.Close()
			return nil, fmt.Errorf("the tcp iterator reports connections only (%s)", s.why)
		}
	case cfg.Backend == "" || cfg.Backend == BackendTrack:
		s.track, err = openTrack(ns, &s.cfg)
		if err == nil {
			s.why = fmt.Sprintf("changes only: activity on a socket idle for 10 samples shows up to %d samples late, changes without activity (buffer sizes, cgroup, inode) up to %d; full walk every %d samples", trackIdleEvery-1, trackCheckAll, trackResync) +
				prefetchNote(s.track.tr.Prefetching())
			break
		}
		if cfg.Backend == BackendTrack {
			s.Close()
			return nil, err
		}
		s.why = "tracked mode: " + err.Error()
		fallthrough
	default:
		s.iter, err = openIter(ns, &s.cfg)
		if err != nil {
			if cfg.Backend == BackendIter {
				s.Close()
				return nil, err
			}
			s.why = err.Error()
		}
	}
	s.use = s.iter != nil
	if s.use && cfg.Backend == "" {
		s.pick()
	}
	if s.use && cfg.Backend == BackendIter {
		s.why = strings.TrimPrefix(prefetchNote(s.iter.it.Prefetching()), "; ")
	}
	if !cfg.NoProcess {
		s.procs = newProcCache("/proc", cfg.ProcRefresh)
		s.procs.useIterator()
	}
	return s, nil
}

// prefetchNote says which variant of the iterator's walk program runs
// (tcpiter.Config.Prefetch), for Backend's reason.
func prefetchNote(on bool) string {
	if on {
		return "; walks prefetch the next socket"
	}
	return "; walks without prefetch (the kernel refuses it: lanes doctor)"
}

// Backend names the sampling backend in use and, for sock_diag, why the
// BPF iterator is not used.
func (s *Sampler) Backend() (name, why string) {
	if s.track != nil {
		return BackendTrack, s.why
	}
	if s.use {
		return BackendIter, s.why
	}
	return BackendDiag, s.why
}

// repick is how many samples an automatic choice of backend holds.
const repick = 600

// pick times one walk of each backend and keeps the cheaper: the CPU time
// of this thread, where both do their kernel work (recvmsg or read). The
// iterator's walk has a fixed cost (every bucket of the kernel's TCP hash
// table, with a cond_resched each) and a lower cost per socket, so which
// one is cheaper depends on the table size and the number of sockets.
func (s *Sampler) pick() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	nop := func(*Sock) {}
	diagVisit := nop
	if s.iter.inKLane && s.cfg.LaneOf != nil {
		// With sock_diag the lanes cost a map lookup (a system call) per
		// socket; the iterator reads them in the kernel.
		diagVisit = func(sk *Sock) { s.cfg.LaneOf(sk.Cookie) }
	}
	t0 := threadCPU()
	ierr := s.iter.dump(nop)
	t1 := threadCPU()
	derr := s.conn.dumpAll(s.cfg.States, s.cfg.IPv4Only, diagVisit)
	t2 := threadCPU()
	ci, cd := t1-t0, t2-t1
	s.use = ierr == nil && (derr != nil || ci <= cd)
	s.why = fmt.Sprintf("cheaper here: one walk %v CPU (bpf-iter), %v (sock_diag)", ci.Round(time.Microsecond), cd.Round(time.Microsecond))
	if ierr != nil {
		s.why = "iterator walk failed: " + ierr.Error()
	}
	if s.use {
		s.why += prefetchNote(s.iter.it.Prefetching())
	}
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Interval is the configured sampling interval.
func (s *Sampler) Interval() time.Duration { return s.cfg.Interval }

// Close releases the netlink socket and the iterator.
func (s *Sampler) Close() error {
	var errs []error
	if s.track != nil {
		errs = append(errs, s.track.Close())
	}
	if s.iter != nil {
		errs = append(errs, s.iter.Close())
	}
	if s.nsH.IsOpen() {
		errs = append(errs, s.nsH.Close())
	}
	if s.procs != nil {
		errs = append(errs, s.procs.close())
	}
	return errors.Join(append(errs, s.conn.Close())...)
}

// Sample takes one sample of all matching sockets, in the kernel's dump
// order (tracked mode: no particular order; see SortByThroughput). The
// returned slice is the sampler's and is reused by the next call: read
// it, but do not reorder or change it in place (slices.Clone it first).
// In the tracked mode the slice is the sampler's table itself, in which
// only the flows that changed are rewritten: a reordered slice or a field
// changed in place would corrupt the next samples.
func (s *Sampler) Sample() ([]Flow, error) {
	now := time.Now()
	s.buf = s.buf[:0]
	s.Dumped = 0
	s.gen++
	visit := func(sk *Sock) {
		s.Dumped++
		if f, ok := s.flowOf(sk, now); ok {
			s.buf = append(s.buf, f)
		}
	}
	if s.track != nil {
		if err := s.sampleTracked(now); err != nil {
			return nil, err
		}
		s.trackedOutput(now)
		s.prevT = now
		s.Matched = len(s.buf)
		return s.buf, nil
	}
	if s.cfg.Backend == "" && s.iter != nil && s.gen%repick == 0 {
		s.pick()
	}
	if s.use {
		if err := s.iter.dump(visit); err != nil {
			return nil, err
		}
	} else if err := s.conn.dumpAll(s.cfg.States, s.cfg.IPv4Only, visit); err != nil {
		return nil, err
	}
	if s.gen%16 == 0 || len(s.known) > 2*s.Dumped+64 {
		for k, p := range s.known {
			if p.gen != s.gen {
				delete(s.known, k)
			}
		}
	}
	s.Matched = len(s.buf)
	return s.buf, nil
}

// SortByThroughput orders flows by their rate, sent and received together
// (a download counts), highest first, then by
// local and remote address (for views; Sample returns them in dump order).
func SortByThroughput(flows []Flow) {
	idx := make([]int, len(flows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		fa, fb := &flows[a], &flows[b]
		if c := cmp.Compare(fb.Throughput+fb.RecvRate, fa.Throughput+fa.RecvRate); c != 0 {
			return c
		}
		if c := strings.Compare(fa.Src, fb.Src); c != 0 {
			return c
		}
		return strings.Compare(fa.Dst, fb.Dst)
	})
	sorted := make([]Flow, len(flows))
	for i, j := range idx {
		sorted[i] = flows[j]
	}
	copy(flows, sorted)
}

// flowOf filters one socket and turns it into a Flow (the sock_diag and
// iterator backends; the tracked one keeps its own table, track.go).
func (s *Sampler) flowOf(sk *Sock, now time.Time) (Flow, bool) {
	l, ok := s.admit(sk)
	if !ok {
		return Flow{}, false
	}
	p, seen := s.known[sk.Cookie]
	if !seen || sk.Cookie == 0 || p.gen != s.gen-1 {
		p = &prevCounters{src: sk.Src.String(), dst: sk.Dst.String(), procGen: -1}
		seen = false
		if sk.Cookie != 0 {
			s.known[sk.Cookie] = p
		}
	}
	p.gen = s.gen
	if p.cong != string(sk.Cong) { // no allocation for the comparison
		p.cong = string(sk.Cong)
	}
	f := Flow{
		Time: now, Cookie: sk.Cookie, Src: p.src, Dst: p.dst,
		State: StateName(sk.State), UID: sk.UID, Inode: sk.Inode, CgroupID: sk.CgroupID,
		Cong: p.cong, SendQ: sk.WQueue, RecvQ: sk.RQueue, Lane: l,
	}
	if s.procs != nil {
		// The owner is looked up again only after the cache rescanned /proc.
		if p.procGen != s.procs.scans {
			p.proc, p.procGen = s.procs.lookupGen(sk.Inode, now)
		}
		if !s.cfg.Filter.ownerMatch(p.proc) {
			return Flow{}, false
		}
		f.PID, f.Comm = p.proc.PID, p.proc.Comm
	}
	setSockFields(&f, sk)
	if sk.HasInfo {
		ti := &sk.Info
		if seen {
			f.Throughput, f.RecvRate = rates(ti, p.acked, p.recvd, now.Sub(p.t))
		}
		p.t, p.acked, p.recvd = now, ti.BytesAcked, ti.BytesRecv
	}
	return f, true
}

// admit applies the filters that need no owner process (addresses, ports,
// cgroup, lanes) and returns the socket's lane.
func (s *Sampler) admit(sk *Sock) (lane.Lane, bool) {
	fl := &s.cfg.Filter
	if !fl.matchAddr(sk) {
		return lane.Unset, false
	}
	if fl.CgroupID != 0 && sk.CgroupID != fl.CgroupID {
		return lane.Unset, false
	}
	l := lane.Unset
	if sk.HasLane {
		l = sk.Lane
	} else if s.cfg.LaneOf != nil {
		var ok bool
		l, ok = s.cfg.LaneOf(sk.Cookie)
		if !ok || l == lane.Unset {
			l = lane.Interactive
		}
	}
	if len(fl.Lanes) > 0 && !laneIn(l, fl.Lanes) {
		return l, false
	}
	return l, true
}

// ownerMatch: the pid and comm filters accept a socket of p.
func (fl *Filter) ownerMatch(p Proc) bool {
	return (fl.PID == 0 || p.PID == fl.PID) && (fl.Comm == "" || p.Comm == fl.Comm)
}

// setSockFields copies into f what sk says of the connection's state:
// memory, tcp_info (all but the flow's identity, owner, lane and rates).
func setSockFields(f *Flow, sk *Sock) {
	f.DSCP = sk.DSCP()
	if sk.NSKMem > 5 {
		f.RcvBuf, f.SndBuf, f.WmemQueued = sk.SKMem[1], sk.SKMem[3], sk.SKMem[5]
	}
	if sk.NSKMem > 8 {
		f.Drops = sk.SKMem[8]
	}
	if !sk.HasInfo {
		return
	}
	ti := &sk.Info
	f.CAState = ti.CAState.String()
	f.Cwnd, f.SSThresh, f.MSS = ti.SndCwnd, ti.SndSSThresh, ti.SndMSS
	f.SRTT, f.RTTVar, f.MinRTT, f.RTO = ti.RTT, ti.RTTVar, ti.MinRTT, ti.RTO
	f.Retransmits, f.TotalRetrans, f.Lost = ti.Retransmits, ti.TotalRetrans, ti.Lost
	f.Unacked, f.Sacked = ti.Unacked, ti.Sacked
	f.BytesSent, f.BytesAcked, f.BytesRecv, f.BytesRetrans = ti.BytesSent, ti.BytesAcked, ti.BytesRecv, ti.BytesRetrans
	f.DeliveryRate = ti.DeliveryRate * 8
	if ti.PacingRate != ^uint64(0) {
		f.PacingRate = ti.PacingRate * 8
	}
	f.Notsent, f.SndWnd = ti.NotsentBytes, ti.SndWnd
	f.RcvRTT = ti.RcvRTT
	f.BusyTime, f.RwndLimited, f.SndbufLimited, f.AppLimited = ti.BusyTime, ti.RwndLimited, ti.SndbufLimited, ti.AppLimited
}

// rates are the throughput and receive rate, bits/s, from the byte
// counters acked and recvd dt earlier (0 where a counter went back).
func rates(ti *TCPInfo, acked, recvd uint64, dt time.Duration) (thr, recv float64) {
	sec := dt.Seconds()
	if sec <= 0 {
		return 0, 0
	}
	if ti.BytesAcked >= acked {
		thr = float64(ti.BytesAcked-acked) * 8 / sec
	}
	if ti.BytesRecv >= recvd {
		recv = float64(ti.BytesRecv-recvd) * 8 / sec
	}
	return thr, recv
}

// empty: the filter matches every socket.
func (fl *Filter) empty() bool {
	return len(fl.Lanes) == 0 && !fl.Local.IsValid() && !fl.Remote.IsValid() && fl.LocalPort == 0 &&
		fl.RemotePort == 0 && fl.Port == 0 && fl.PID == 0 && fl.Comm == "" && fl.Cgroup == "" && fl.CgroupID == 0
}

func (fl *Filter) matchAddr(sk *Sock) bool {
	if fl.LocalPort != 0 && sk.Src.Port() != fl.LocalPort {
		return false
	}
	if fl.RemotePort != 0 && sk.Dst.Port() != fl.RemotePort {
		return false
	}
	if fl.Port != 0 && sk.Src.Port() != fl.Port && sk.Dst.Port() != fl.Port {
		return false
	}
	if fl.Local.IsValid() && !fl.Local.Contains(sk.Src.Addr()) {
		return false
	}
	if fl.Remote.IsValid() && !fl.Remote.Contains(sk.Dst.Addr()) {
		return false
	}
	return true
}

func laneIn(l lane.Lane, ls []lane.Lane) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// Run samples every interval until ctx ends, handing each sample to fn; an
// error from fn or from sampling ends the run.
func (s *Sampler) Run(ctx context.Context, fn func([]Flow) error) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		flows, err := s.Sample()
		if err != nil {
			return err
		}
		if err := fn(flows); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Stats are counters of the sampler's netlink conversation.
type Stats struct {
	DumpIntr, BadMsgs uint64
	ProcScans         int
	// KernelFilter: the port/cgroup filter runs in the kernel (inet_diag
	// bytecode, or the BPF iterator), not only in user space.
	KernelFilter bool
}

// Stats returns the counters so far.
func (s *Sampler) Stats() Stats {
	st := Stats{DumpIntr: s.conn.DumpIntr, BadMsgs: s.conn.BadMsgs, KernelFilter: s.track != nil || s.use || s.conn.bytecode != nil}
	if s.procs != nil {
		st.ProcScans = s.procs.scans
	}
	return st
}
