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
// the socket changes and on every full walk (every trackResync samples).
package tcpmon

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
)

// trackResync is how many samples pass between two full walks (30 s at the
// default 100 ms): they refresh what changes without the socket's own
// fields changing (LaneOf lanes, owner process) and recover from a full
// ring of closed sockets.
const trackResync = 300

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
	resync bool // the next sample is a full walk
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
	return &trackSource{tr: tr, ns: ns, recConv: conv, resync: true, pos: map[uint64]int{}}, nil
}

func (t *trackSource) Close() error { return t.tr.Close() }

// sample brings the table up to date; the flows are in t.flows.
func (s *Sampler) sampleTracked(now time.Time) error {
	t := s.track
	full := t.resync || s.gen%trackResync == 0
	open := func() (io.ReadCloser, error) { return t.tr.OpenDelta() }
	if full {
		open = t.tr.OpenFull
	}
	var r readCloser
	var err error
	if full && t.ns.IsOpen() {
		r, err = inNetNS(t.ns, func() (readCloser, error) { return open() })
	} else {
		r, err = open()
	}
	if err != nil {
		return err
	}
	err = t.rd.Each(r, func(x *tcpiter.Rec) {
		s.Dumped++
		switch {
		case x.Kind == tcpiter.RecGone:
			s.untrack(x.Cookie)
		case x.Kind == tcpiter.RecReq || (t.ipv4 && x.Family != unix.AF_INET):
		default:
			s.upsert(t.fill(x), now)
		}
	})
	r.Close()
	if err != nil {
		return err
	}
	t.resync, err = t.tr.Gone(s.untrack)
	if err != nil {
		return err
	}
	if full { // what the walk did not see is gone
		for i := 0; i < len(t.flows); {
			if t.upd[i] != s.gen {
				s.untrack(t.flows[i].Cookie)
				continue
			}
			i++
		}
	}
	return nil
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
