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
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// The full walk in progress (nil: none), read trackWalkChunk records
	// a sample, and the sample it started in.
	walk      readCloser
	walkRd    tcpiter.Reader
	walkFrom  uint64
	walkChunk int // trackWalkChunk (tests: less)
	recConv
	// The table: flows[pos[cookie]], upd[i] the sample that last set flows[i].
	pos   map[uint64]int
	flows []Flow
	upd   []uint64
	// outGen is the sample the sampler's output (Sampler.buf, in the
	// table's order) was last brought up to.
	outGen uint64
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
	tr, err := tcpiter.LoadTracker(c, uint32(st.Ino))
	if err != nil {
		return nil, err
	}
	return &trackSource{tr: tr, ns: ns, recConv: conv, walkChunk: trackWalkChunk, pos: map[uint64]int{}}, nil
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
	return nil
}

// firstWalk fills the table with one whole full walk.
func (s *Sampler) firstWalk(now time.Time) error {
	t := s.track
	inUse := 0
	r, err := t.openFull(&inUse)
	if err != nil {
		return err
	}
	if s.cfg.Filter.empty() && inUse > len(t.flows) {
		// Sized once: growing a table of 100,000 flows (~40 MB, with
		// pointers) by appends cost ~190 ms there in copies, page
		// faults and write barriers.
		t.flows = slices.Grow(t.flows, inUse)
		t.upd = slices.Grow(t.upd, inUse)
		t.pos = make(map[uint64]int, inUse)
		s.known = make(map[uint64]*prevCounters, inUse)
	}
	err = t.rd.Each(r, func(x *tcpiter.Rec) { s.record(x, now, true) })
	r.Close()
	if err != nil {
		return err
	}
	if _, err := t.tr.Gone(s.untrack); err != nil {
		return err
	}
	s.sweep(s.gen)
	t.filled, t.resync = true, false
	return nil
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
// also reads how many TCP sockets the namespace has (/proc/net/sockstat
// and sockstat6; 0 if unknown).
func (t *trackSource) openFull(inUse *int) (readCloser, error) {
	open := func() (readCloser, error) {
		if inUse != nil {
			*inUse = tcpInUse("/proc/thread-self/net/sockstat", "TCP:") +
				tcpInUse("/proc/thread-self/net/sockstat6", "TCP6:")
		}
		return t.tr.OpenFull()
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
// sample is dropped: it says the same, and upsert would take the
// socket's counters of this sample for those of the last.
func (s *Sampler) record(x *tcpiter.Rec, now time.Time, full bool) {
	t := s.track
	s.Dumped++
	switch {
	case x.Kind == tcpiter.RecGone:
		s.untrack(x.Cookie)
	case x.Kind == tcpiter.RecReq || (t.ipv4 && x.Family != unix.AF_INET):
	default:
		if i, ok := t.pos[x.Cookie]; full && ok && t.upd[i] == s.gen {
			return
		}
		s.upsert(t.fill(x), now)
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

// upsert sets the socket's flow in the table, or drops it if it no longer
// matches the filter.
func (s *Sampler) upsert(sk *Sock, now time.Time) {
	t := s.track
	i, ok := t.pos[sk.Cookie]
	if ok {
		// Alive and unchanged since the last sample: its counters were
		// the same then (flowOf's rates are over one sample interval).
		if p := s.known[sk.Cookie]; p != nil {
			p.gen, p.t = s.gen-1, s.prevT
		}
	}
	f, match := s.flowOf(sk, now)
	switch {
	case !match:
		s.untrack(sk.Cookie)
	case ok:
		t.flows[i], t.upd[i] = f, s.gen
	default:
		t.pos[sk.Cookie] = len(t.flows)
		t.flows = append(t.flows, f)
		t.upd = append(t.upd, s.gen)
	}
}

// untrack removes a socket's flow (swapping the last one into its place).
func (s *Sampler) untrack(cookie uint64) {
	t := s.track
	delete(s.known, cookie)
	i, ok := t.pos[cookie]
	if !ok {
		return
	}
	delete(t.pos, cookie)
	last := len(t.flows) - 1
	if i != last {
		t.flows[i], t.upd[i] = t.flows[last], t.upd[last]
		t.pos[t.flows[i].Cookie] = i
	}
	t.flows, t.upd = t.flows[:last], t.upd[:last]
}

// trackedOutput brings s.buf up to the table: every flow at time now,
// with zero rates for those whose socket did not change. s.buf keeps the
// table's order from sample to sample, so only a flow that changed since
// the last output is copied whole (~390 bytes); the others get their time
// and, if they changed in the previous sample, zero rates: one cache line
// each instead of copying ~4 MB at 10,000 flows (the larger part of a
// sample's cost in user space). A slot whose cookie is not the table's
// (the table moved a flow, or the caller reordered the sample, which
// Sample's contract forbids) is copied whole.
func (s *Sampler) trackedOutput(now time.Time) {
	t := s.track
	s.buf = slices.Grow(s.buf[:0], len(t.flows))[:len(t.flows)]
	for i := range t.flows {
		f := &s.buf[i]
		switch {
		case t.upd[i] > t.outGen || f.Cookie != t.flows[i].Cookie:
			*f = t.flows[i]
			if t.upd[i] != s.gen {
				f.Throughput, f.RecvRate = 0, 0
			}
		case t.upd[i] == t.outGen:
			f.Throughput, f.RecvRate = 0, 0
		}
		f.Time = now
	}
	t.outGen = s.gen
}
