// tracker.go: the tracked mode (see tcpiter.c): a full walk that records
// every socket of the namespace in an sk_storage map, then walks of that
// map alone that report only what changed, and the cookies of sockets
// that closed from a ring buffer.
package tcpiter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// Tracker is a loaded tracked-mode iterator set for one namespace.
type Tracker struct {
	objs struct {
		DumpTrack *ebpf.Program `ebpf:"dump_track"`
		Delta     *ebpf.Program `ebpf:"delta"`
		DeltaAll  *ebpf.Program `ebpf:"delta_all"`
		Track     *ebpf.Program `ebpf:"track"`
		Tracked   *ebpf.Map     `ebpf:"tracked"`
		Gone      *ebpf.Map     `ebpf:"gone"`
		Lost      *ebpf.Map     `ebpf:"lost"`
		SampleNo  *ebpf.Map     `ebpf:"sample_no"`
	}
	full, delta, deltaAll *link.Iter
	hook                  link.Link
	ring                  *ringbuf.Reader
	lost                  uint64 // lost count already seen
	walks                 uint32 // delta walks so far
}

// LoadTracker loads and attaches the tracked mode for the namespace whose
// inode number is netns (the one Full will be opened in). It needs, beyond
// Load, sk_storage from tracing programs (5.11), the sk_storage map
// iterator and tp_btf; the caller falls back to Load without them.
func LoadTracker(c Config, netns uint32) (t *Tracker, err error) {
	spec, opts, err := loadSpec(c, netns)
	if err != nil {
		return nil, err
	}
	t = &Tracker{}
	if err := spec.LoadAndAssign(&t.objs, opts); err != nil {
		return nil, fmt.Errorf("load tcp tracker: %w", err)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	// The hook first: a socket created from now on is tracked, and the
	// full walk finds every one created before.
	if t.hook, err = link.AttachTracing(link.TracingOptions{Program: t.objs.Track}); err != nil {
		return nil, fmt.Errorf("attach tcp tracker hook: %w", err)
	}
	if t.full, err = link.AttachIter(link.IterOptions{Program: t.objs.DumpTrack}); err != nil {
		return nil, fmt.Errorf("attach tcp tracker walk: %w", err)
	}
	if t.delta, err = link.AttachIter(link.IterOptions{Program: t.objs.Delta, Map: t.objs.Tracked}); err != nil {
		return nil, fmt.Errorf("attach tcp tracker delta: %w", err)
	}
	if t.deltaAll, err = link.AttachIter(link.IterOptions{Program: t.objs.DeltaAll, Map: t.objs.Tracked}); err != nil {
		return nil, fmt.Errorf("attach tcp tracker delta: %w", err)
	}
	if t.ring, err = ringbuf.NewReader(t.objs.Gone); err != nil {
		return nil, fmt.Errorf("tcp tracker ring: %w", err)
	}
	t.ring.SetDeadline(time.Unix(0, 1)) // never wait: Gone drains what is there
	return t, nil
}

// Close detaches and unloads everything.
func (t *Tracker) Close() error {
	var cs []io.Closer
	if t.ring != nil {
		cs = append(cs, t.ring)
	}
	if t.delta != nil {
		cs = append(cs, t.delta)
	}
	if t.deltaAll != nil {
		cs = append(cs, t.deltaAll)
	}
	if t.full != nil {
		cs = append(cs, t.full)
	}
	if t.hook != nil {
		cs = append(cs, t.hook)
	}
	o := &t.objs
	for _, p := range []*ebpf.Program{o.DumpTrack, o.Delta, o.DeltaAll, o.Track} {
		if p != nil {
			cs = append(cs, p)
		}
	}
	for _, m := range []*ebpf.Map{o.Tracked, o.Gone, o.Lost, o.SampleNo} {
		if m != nil {
			cs = append(cs, m)
		}
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// OpenFull starts a full walk of the calling thread's namespace (which
// must be the tracker's): every matching socket, tracked from then on.
func (t *Tracker) OpenFull() (io.ReadCloser, error) {
	r, err := t.full.Open()
	if err != nil {
		return nil, fmt.Errorf("open tcp tracker walk: %w", err)
	}
	return r, nil
}

// OpenDelta starts a walk of the tracked sockets: records of those that
// changed since their last record, RecGone for those that stopped matching.
// Sockets with no activity since (no segment in or out, no read or write,
// same state and lane) are skipped unread, unless all is set: then every
// field of every socket is compared (what changes without activity, such
// as a buffer size set by the application, is seen only then; without
// all, each socket gets that comparison every 50th walk, staggered by
// cookie). A socket found quiet 10 walks in a row is looked at only every
// 4th walk (staggered by cookie) until it changes state or is seen active:
// activity on it is reported up to 3 walks late.
func (t *Tracker) OpenDelta(all bool) (io.ReadCloser, error) {
	t.walks++
	if err := t.objs.SampleNo.Update(uint32(0), t.walks, ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("tcp tracker round: %w", err)
	}
	l := t.delta
	if all {
		l = t.deltaAll
	}
	r, err := l.Open()
	if err != nil {
		return nil, fmt.Errorf("open tcp tracker delta: %w", err)
	}
	return r, nil
}

// Gone calls fn with the cookie of every reported socket that closed since
// the last call. resync is true if the ring had no room for some: the
// caller must then rebuild its view with a full walk.
func (t *Tracker) Gone(fn func(cookie uint64)) (resync bool, err error) {
	var rec ringbuf.Record
	for {
		err := t.ring.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("tcp tracker ring: %w", err)
		}
		if len(rec.RawSample) >= 8 {
			fn(binary.NativeEndian.Uint64(rec.RawSample))
		}
	}
	var n uint64
	if err := t.objs.Lost.Lookup(uint32(0), &n); err != nil {
		return false, fmt.Errorf("tcp tracker lost count: %w", err)
	}
	resync = n != t.lost
	t.lost = n
	return resync, nil
}
