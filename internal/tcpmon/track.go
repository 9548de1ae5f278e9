// track.go: the tracked sampling backend (BackendTrack; tcpiter.Tracker).
// One full walk fills a table of flows; every later sample walks only the
// sockets the kernel tracks for this sampler (no hash-table walk, no
// socket lock) and receives records of the sockets that changed and the
// cookies of those that went; the flows of unchanged sockets are the
// previous sample's with the new time and zero rates. An idle socket costs
// a look at its activity counters in the kernel and a copy of its flow in
// user space; only a changed one costs a full record.
//
// Note: request sockets (SYN-RECV before accept) are not reported (no
// per-socket storage exists for them). The owner process and lanes given
// by Config.LaneOf (not LaneMap, which the kernel reads) are looked up when
// the socket changes and on every full walk (one starts every trackResync
// samples and is read over several: trackWalkChunk records a sample).
package tcpmon

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
)

// trackResync is how many samples pass between the starts of two full
// walks (30 s at the default 100 ms): they refresh what changes without
// the socket's own fields changing (LaneOf lanes, owner process), report
// request sockets, and recover from a full ring of closed sockets (which
// also starts one at once) or from a socket the kernel failed to track.
const trackResync = 300

// trackWalkChunk is how many records of a full walk one sample reads
// beside its change walk: a full walk after the first one is spread over
// ceil(sockets / trackWalkChunk) samples (7 at 100,000 sockets), so no
// sample pays for the whole walk (~2 us per socket, kernel and user
// space: ~200 ms at 100,000). The first walk, which fills the table, is
// read whole.
const trackWalkChunk = 16384

// trackHoldAt is the number of sockets from which the first walk holds
// garbage collections off until its table is filled (holdGC; a variable
// for the tests).
var trackHoldAt = 10000

// What a change walk skips (tcpiter.Tracker.OpenDelta): a socket with no
// activity (no segment in or out, no read or write by the application,
// same state and lane) is not read beyond its activity counters; one
// quiet for 10 samples moves to a cold map looked at every
// tcpiter.ColdMaps-th (8th) sample only (activity on it is reported up to
// 7 samples late; a state change at once); every field of each socket is
// compared about every 48 samples (what changes without activity, such as
// a buffer size or congestion control set by the application, a cgroup
// move or an accept, is reported up to 48 samples late).
const (
	trackIdleEvery = tcpiter.ColdMaps
	trackCheckAll  = 48
)

// trackSource samples a namespace through the tracked mode.
type trackSource struct {
	tr     *tcpiter.Tracker
	ns     netns.NsHandle // borrowed; not open: the caller's namespace
	rd     tcpiter.Reader
	resync bool // start a full walk at the next sample
	filled bool // the first full walk is done: the table holds every socket
	// freeFirst: the first walk's slots and program are still held; the
	// next sample frees them (tcpiter.Tracker.FreeFirst: unmapping ~29 MB
	// at 100,000 sockets is ~1 ms that the first sample need not wait for).
	freeFirst bool
	// untracked: sockets in the table may have no storage in the kernel
	// (the first walk creates none) until a full walk ends.
	untracked bool
	// fresh: the first walk into an empty table, whose records are put
	// without looking the cookie up (dedupe after it).
	fresh bool
	// The full walk in progress (nil: none), read trackWalkChunk records
	// a sample, and the sample it started in.
	walk      readCloser
	walkRd    tcpiter.Reader
	walkFrom  uint64
	walkChunk int // trackWalkChunk (tests: less)
	recConv
	// The table, which is also the sample Sample hands out:
	// flows[pos[cookie]]; upd[i] is the sample that last set flows[i],
	// slot[i] what a later record of its socket needs.
	pos   map[uint64]int
	flows []Flow
	upd   []uint64
	slot  []slotState
	// outGen is the sample the table was last handed out in.
	outGen uint64
	congs  map[string]string // congestion control names, each made a string once
	addrs  addrBatch         // the first walk's address strings
}

// slotState is what the table keeps of a flow's socket beside the flow,
// without pointers (the garbage collector does not look into it): its
// addresses as the kernel gave them, to keep the flow's strings while they
// do not change, and the owner scan its process was looked up in.
type slotState struct {
	saddr, daddr [16]byte
	sport, dport uint16
	family       uint16
	procGen      int32 // procCache.scans at the lookup; -1: ask again
}

// openTrack loads the tracked mode for the sampler's namespace.
func openTrack(ns netns.NsHandle, cfg *Config) (*trackSource, error) {
	c, conv, err := iterConfig(cfg)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if ns.IsOpen() {
		err = unix.Fstat(int(ns), &st)
	} else {
		err = unix.Stat("/proc/thread-self/ns/net", &st)
	}
	if err != nil {
		return nil, fmt.Errorf("tcp tracker: network namespace: %w", err)
	}
	c.FirstSlots = firstSlots(ns)
	tr, err := tcpiter.LoadTracker(c, uint32(st.Ino))
	if err != nil {
		return nil, err
	}
	return &trackSource{tr: tr, ns: ns, recConv: conv, walkChunk: trackWalkChunk, pos: map[uint64]int{},
		congs: map[string]string{}}, nil
}

// firstSlots is how many records of the first walk the kernel is to
// write into memory this process maps (tcpiter.Config.FirstSlots): the
// namespace's TCP sockets now, and an eighth more for those opened before
// the first sample (any beyond come through the walk's stream). The
// memory, tcpiter.RecSize (256) bytes a slot, is freed after the first
// walk: ~29 MB at 100,000 sockets.
func firstSlots(ns netns.NsHandle) int {
	count := func() (int, error) {
		return tcpInUse("/proc/thread-self/net/sockstat", "TCP:") +
			tcpInUse("/proc/thread-self/net/sockstat6", "TCP6:"), nil
	}
	var n int
	if ns.IsOpen() {
		n, _ = inNetNS(ns, count)
	} else {
		runtime.LockOSThread()
		n, _ = count()
		runtime.UnlockOSThread()
	}
	return n + n/8 + 64
}

func (t *trackSource) Close() error {
	t.stopWalk()
	return t.tr.Close()
}

// stopWalk closes the full walk in progress, if any.
func (t *trackSource) stopWalk() {
	if t.walk != nil {
		t.walk.Close()
		t.walk = nil
		t.walkRd.Reset()
	}
}

// sampleTracked brings the table up to date; the flows are in t.flows.
// The first sample reads a full walk whole; every later one reads a change
// walk and, while a full walk is in progress, its next trackWalkChunk
// records.
func (s *Sampler) sampleTracked(now time.Time) error {
	t := s.track
	if !t.filled {
		return s.firstWalk(now)
	}
	if t.freeFirst {
		t.freeFirst = false
		if err := t.tr.FreeFirst(); err != nil {
			return err
		}
	}
	r, err := t.tr.OpenDelta()
	if err != nil {
		return err
	}
	err = t.rd.Each(r, func(x *tcpiter.Rec) { s.record(x, now, false) })
	r.Close()
	if err != nil {
		return err
	}
	lost, err := t.tr.Gone(s.untrack)
	if err != nil {
		return err
	}
	if lost || t.resync || s.gen%trackResync == 0 {
		t.resync = false
		if err := s.startWalk(); err != nil {
			return err
		}
	}
	if t.walk == nil {
		return nil
	}
	eof, err := t.walkRd.Some(t.walk, t.walkChunk, func(x *tcpiter.Rec) { s.record(x, now, true) })
	if err != nil { // start over at the next sample
		t.stopWalk()
		t.resync = true
		return err
	}
	if !eof {
		return nil
	}
	t.stopWalk()
	s.sweep(t.walkFrom)
	if t.untracked {
		t.untracked = false
		return t.tr.SetUntracked(false)
	}
	return nil
}

// firstWalk fills the table with one whole full walk. The walk is read
// ahead on another goroutine (tcpiter.Tracker.ReadFirst): the kernel walks
// the sockets on one core while this one sizes the table, walks the socket
// owners and turns the records already written into flows (at 100,000
// sockets the walk is ~100 ms and the rest ~60-110 ms of CPU, which
// otherwise came after it). The kernel writes the records into slots
// mapped into this process (firstSlots), which the next sample frees.
// From trackHoldAt sockets no garbage collection runs until the table is
// filled (holdGC).
func (s *Sampler) firstWalk(now time.Time) error {
	t := s.track
	if err := t.tr.SetUntracked(true); err != nil {
		return err
	}
	t.untracked = true
	inUse := 0
	r, err := t.openFull(&inUse)
	if err != nil {
		return err
	}
	defer r.Close()
	ahead, err := t.tr.ReadFirst(r)
	if err != nil {
		return err
	}
	defer ahead.Close()
	if inUse >= trackHoldAt {
		defer holdGC()()
	}
	s.prepareTable(inUse)
	if s.procs != nil {
		s.procs.sizeHint = inUse
		if inUse > 0 {
			s.procs.prime(now)
		}
	}
	t.addrs.on, t.fresh = true, len(t.flows) == 0
	err = ahead.Each(func(x *tcpiter.Rec) { s.record(x, now, true) })
	t.addrs.flush(t.flows)
	t.addrs = addrBatch{}
	if t.fresh && len(t.pos) != len(t.flows) {
		s.dedupe()
	}
	t.fresh = false
	if err != nil {
		return err
	}
	t.freeFirst = true
	if _, err := t.tr.Gone(s.untrack); err != nil {
		return err
	}
	s.sweep(s.gen)
	// The next sample starts the full walk that tracks every socket.
	t.filled, t.resync = true, true
	return nil
}

// prepareTable sizes the empty table for the first walk's inUse sockets.
// The caller holds collections off from at least inUse >= trackHoldAt
// (holdGC) until the table is filled.
func (s *Sampler) prepareTable(inUse int) {
	t := s.track
	if !s.cfg.Filter.empty() || inUse <= len(t.flows) {
		return
	}
	// Sized once: growing a table of 100,000 flows (~40 MB, with
	// pointers) by appends cost ~190 ms there in copies, page faults
	// and write barriers.
	t.flows = slices.Grow(t.flows, inUse)
	writePages(t.flows[:inUse])
	t.upd = slices.Grow(t.upd, inUse)
	t.slot = slices.Grow(t.slot, inUse)
	t.pos = make(map[uint64]int, inUse)
}

// startWalk starts a full walk (again, if one is in progress: a lost
// closed socket may be behind its position).
func (s *Sampler) startWalk() error {
	t := s.track
	t.stopWalk()
	r, err := t.openFull(nil)
	if err != nil {
		return err
	}
	t.walk, t.walkFrom = r, s.gen
	return nil
}

// openFull opens a full walk in the sampler's namespace; with inUse it
// is the first walk (tcpiter.Tracker.OpenFirst: it tracks nothing), and
// it also reads how many TCP sockets the namespace has
// (/proc/net/sockstat and sockstat6; 0 if unknown).
func (t *trackSource) openFull(inUse *int) (readCloser, error) {
	open := func() (readCloser, error) {
		if inUse == nil {
			return t.tr.OpenFull()
		}
		*inUse = tcpInUse("/proc/thread-self/net/sockstat", "TCP:") +
			tcpInUse("/proc/thread-self/net/sockstat6", "TCP6:")
		return t.tr.OpenFirst()
	}
	if t.ns.IsOpen() {
		return inNetNS(t.ns, open)
	}
	runtime.LockOSThread() // the thread's namespace, for both
	defer runtime.UnlockOSThread()
	return open()
}

// tcpInUse is the "inuse" count of the line starting with prefix in a
// sockstat file; 0 if there is none.
func tcpInUse(path, prefix string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == prefix && f[1] == "inuse" {
			n, _ := strconv.Atoi(f[2])
			return n
		}
	}
	return 0
}

// record takes one record of a change walk or (full) of a full walk. A
// full walk's record of a socket the change walk already reported in this
// sample is dropped: it says the same, and put would take the socket's
// counters of this sample for those of the last.
func (s *Sampler) record(x *tcpiter.Rec, now time.Time, full bool) {
	t := s.track
	s.Dumped++
	switch {
	case x.Kind == tcpiter.RecGone:
		s.untrack(x.Cookie)
	case x.Kind == tcpiter.RecReq || (t.ipv4 && x.Family != unix.AF_INET):
	case t.fresh:
		s.put(x, 0, false, now)
	default:
		i, ok := t.pos[x.Cookie]
		if full && ok && t.upd[i] == s.gen {
			return
		}
		s.put(x, i, ok, now)
	}
}

// dedupe drops the flows a fresh walk put twice (a socket the kernel's
// walk met twice, having moved in its hash table as the walk passed),
// keeping the last, which pos names.
func (s *Sampler) dedupe() {
	t := s.track
	for i := 0; i < len(t.flows); {
		if t.pos[t.flows[i].Cookie] == i {
			i++
			continue
		}
		last := len(t.flows) - 1
		c := t.flows[last].Cookie
		t.flows[i], t.upd[i], t.slot[i] = t.flows[last], t.upd[last], t.slot[last]
		if t.pos[c] == last {
			t.pos[c] = i
		}
		t.flows[last] = Flow{}
		t.flows, t.upd, t.slot = t.flows[:last], t.upd[:last], t.slot[:last]
	}
}

// sweep drops the flows no record set since sample from: a full walk that
// started then has ended, and every socket alive all along was in it, or
// in a change walk since.
func (s *Sampler) sweep(from uint64) {
	t := s.track
	for i := 0; i < len(t.flows); {
		if t.upd[i] < from {
			s.untrack(t.flows[i].Cookie)
			continue
		}
		i++
	}
}

// put sets the flow of record x's socket in the table: in slot i if old
// (its previous flow), else in a new slot; or drops it if it no longer
// matches the filter. The flow is written in place, and its rates come
// from the previous flow's counters: a socket with no record since the
// last sample was unchanged then (the rates are over one interval).
func (s *Sampler) put(x *tcpiter.Rec, i int, old bool, now time.Time) {
	t := s.track
	sk := t.fill(x)
	l, ok := s.admit(sk)
	if !ok {
		s.untrack(sk.Cookie)
		return
	}
	st := slotState{procGen: -1}
	if old {
		st = t.slot[i]
	}
	var proc Proc
	if s.procs != nil {
		// The owner is looked up again only after the cache rescanned.
		if st.procGen == int32(s.procs.scans) {
			proc = Proc{PID: t.flows[i].PID, Comm: t.flows[i].Comm}
		} else {
			var gen int
			proc, gen = s.procs.lookupGen(sk.Inode, now)
			st.procGen = int32(gen)
		}
		if !s.cfg.Filter.ownerMatch(proc) {
			s.untrack(sk.Cookie)
			return
		}
	}
	if !old {
		i = len(t.flows)
		t.pos[sk.Cookie] = i
		t.flows = append(t.flows, Flow{})
		t.upd = append(t.upd, 0)
		t.slot = append(t.slot, slotState{})
	}
	f := &t.flows[i]
	var thr, recv float64
	if old {
		thr, recv = rates(&sk.Info, f.BytesAcked, f.BytesRecv, now.Sub(s.prevT))
	}
	src, dst := f.Src, f.Dst
	if !old || st.saddr != x.Saddr || st.daddr != x.Daddr || st.sport != x.Sport || st.dport != x.Dport || st.family != x.Family {
		st.saddr, st.daddr, st.sport, st.dport, st.family = x.Saddr, x.Daddr, x.Sport, x.Dport, x.Family
		if t.addrs.on {
			src, dst = "", ""
			t.addrs.add(i, sk.Src, sk.Dst)
		} else {
			src, dst = sk.Src.String(), sk.Dst.String()
		}
	}
	*f = Flow{
		Time: now, Cookie: sk.Cookie, Src: src, Dst: dst,
		State: StateName(sk.State), Lane: l, PID: proc.PID, Comm: proc.Comm,
		UID: sk.UID, Inode: sk.Inode, CgroupID: sk.CgroupID,
		Cong: t.congName(sk.Cong), SendQ: sk.WQueue, RecvQ: sk.RQueue,
		Throughput: thr, RecvRate: recv,
	}
	setSockFields(f, sk)
	t.upd[i], t.slot[i] = s.gen, st
	if len(t.addrs.ends) >= addrBatchLen {
		t.addrs.flush(t.flows)
	}
}

// congName is the congestion control name as a string, made once per name.
func (t *trackSource) congName(b []byte) string {
	if c, ok := t.congs[string(b)]; ok { // no allocation for the lookup
		return c
	}
	c := string(b)
	t.congs[c] = c
	return c
}

// untrack removes a socket's flow (swapping the last one into its place).
func (s *Sampler) untrack(cookie uint64) {
	t := s.track
	i, ok := t.pos[cookie]
	if !ok {
		return
	}
	t.addrs.flush(t.flows) // its pending slots are about to move
	delete(t.pos, cookie)
	last := len(t.flows) - 1
	if i != last {
		t.flows[i], t.upd[i], t.slot[i] = t.flows[last], t.upd[last], t.slot[last]
		t.pos[t.flows[i].Cookie] = i
	}
	t.flows[last] = Flow{} // no strings kept alive past the end
	t.flows, t.upd, t.slot = t.flows[:last], t.upd[:last], t.slot[:last]
}

// trackedOutput makes the table the sample: every flow at time now, with
// zero rates for those whose socket did not change. The table is the
// sample (no copy of it: at 100,000 flows a copy was ~40 MB and ~110 ms
// of the first sample), so only flows not set in this sample are
// touched, one cache line each, and their rates only if they were set
// since the last output (which is why Sample's slice must not be reordered or
// changed in place: `lanes monitor` and the dashboard clone it).
func (s *Sampler) trackedOutput(now time.Time) {
	t := s.track
	for i, u := range t.upd {
		if u == s.gen {
			continue
		}
		f := &t.flows[i]
		f.Time = now
		if u >= t.outGen { // set since the last output: it had rates
			f.Throughput, f.RecvRate = 0, 0
		}
	}
	t.outGen = s.gen
	s.buf = t.flows
}

// writePages writes to one flow per memory page of fl, fresh from the
// system and not yet touched, before anything reads it: read first, each
// page was mapped to the kernel's shared zero page, and the fill's first
// write to it then had to remove that mapping from every CPU running the
// process, with an interrupt to the other core when the read-ahead
// goroutine ran there (~110 ms of system time at 100,000 sockets, perf:
// do_wp_page, flush_tlb_mm_range; the reader was a collection's mark
// workers, which is why the first walk now holds collections
// off). Written first, each is a plain page fault. (One
// madvise(MADV_POPULATE_WRITE) of the table instead cost the same,
// 14-16 ms at 100,000 flows; huge pages, MADV_HUGEPAGE, cost
// 84-97 ms here.)
func writePages(fl []Flow) {
	step := max(1, os.Getpagesize()/int(unsafe.Sizeof(Flow{})))
	for i := 0; i < len(fl); i += step {
		fl[i].Cookie = 0
	}
}

// addrBatch formats the first walk's addresses into one buffer and makes
// them strings a batch at a time (one allocation per batch, not two per
// socket: ~200,000 small objects less at 100,000 sockets). A batch's
// string lives as long as any flow's address in it.
type addrBatch struct {
	on   bool
	buf  []byte
	ends []addrEnd
}

// addrEnd is where slot's source and destination strings end in buf.
type addrEnd struct{ slot, src, dst int }

const addrBatchLen = 1024

// add formats slot's addresses (the flow's strings are set by flush).
func (b *addrBatch) add(slot int, src, dst netip.AddrPort) {
	b.buf = src.AppendTo(b.buf)
	e := addrEnd{slot: slot, src: len(b.buf)}
	b.buf = dst.AppendTo(b.buf)
	e.dst = len(b.buf)
	b.ends = append(b.ends, e)
}

// flush sets the addresses of the batch's slots in flows.
func (b *addrBatch) flush(flows []Flow) {
	if len(b.ends) == 0 {
		return
	}
	str := string(b.buf)
	from := 0
	for _, e := range b.ends {
		flows[e.slot].Src, flows[e.slot].Dst = str[from:e.src], str[e.src:e.dst]
		from = e.dst
	}
	b.buf, b.ends = b.buf[:0], b.ends[:0]
}
