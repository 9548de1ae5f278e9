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
		DeltaCold *ebpf.Program `ebpf:"delta_cold"`
		Track     *ebpf.Program `ebpf:"track"`
		Tracked   *ebpf.Map     `ebpf:"tracked"`
		Gone      *ebpf.Map     `ebpf:"gone"`
		Lost      *ebpf.Map     `ebpf:"lost"`
		SampleNo  *ebpf.Map     `ebpf:"sample_no"`
		Cold0     *ebpf.Map     `ebpf:"cold0"`
		Cold1     *ebpf.Map     `ebpf:"cold1"`
		Cold2     *ebpf.Map     `ebpf:"cold2"`
		Cold3     *ebpf.Map     `ebpf:"cold3"`
	}
	full, delta *link.Iter
	cold        [4]*link.Iter // delta_cold on each cold map
	hook        link.Link
	ring        *ringbuf.Reader
	lost        uint64 // lost count already seen
	walks       uint32 // delta walks so far
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
	for i, m := range t.coldMaps() {
		if t.cold[i], err = link.AttachIter(link.IterOptions{Program: t.objs.DeltaCold, Map: m}); err != nil {
			return nil, fmt.Errorf("attach tcp tracker cold delta: %w", err)
		}
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
	for _, l := range t.cold {
		if l != nil {
			cs = append(cs, l)
		}
	}
	if t.full != nil {
		cs = append(cs, t.full)
	}
	if t.hook != nil {
		cs = append(cs, t.hook)
	}
	o := &t.objs
	for _, p := range []*ebpf.Program{o.DumpTrack, o.Delta, o.DeltaCold, o.Track} {
		if p != nil {
			cs = append(cs, p)
		}
	}
	for _, m := range append([]*ebpf.Map{o.Tracked, o.Gone, o.Lost, o.SampleNo}, t.coldMaps()...) {
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

// coldMaps are the cold maps, in cookie % 4 order.
func (t *Tracker) coldMaps() []*ebpf.Map {
	return []*ebpf.Map{t.objs.Cold0, t.objs.Cold1, t.objs.Cold2, t.objs.Cold3}
}

// OpenDelta starts a walk of the tracked sockets: records of those that
// changed since their last record, RecGone for those that stopped matching.
// It walks the hot map (sockets active in their last 10 looks) and one of
// the four cold maps in turn, so an idle socket is looked at every 4th
// walk (activity on it shows up to 3 walks late; a state change moves it
// back to the hot map at once). A socket with no activity since it was
// last looked at (no segment in or out, no read or write, same state and
// lane) is skipped after reading its activity counters; every field of
// each socket is compared about every 48 walks, staggered by cookie (what
// changes without activity, such as a buffer size set by the application,
// is seen then).
func (t *Tracker) OpenDelta() (io.ReadCloser, error) {
	t.walks++
	if err := t.objs.SampleNo.Update(uint32(0), t.walks, ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("tcp tracker walk number: %w", err)
	}
	hot, err := t.delta.Open()
	if err != nil {
		return nil, fmt.Errorf("open tcp tracker delta: %w", err)
	}
	cold, err := t.cold[t.walks%4].Open()
	if err != nil {
		hot.Close()
		return nil, fmt.Errorf("open tcp tracker cold delta: %w", err)
	}
	return &twoWalks{Reader: io.MultiReader(hot, cold), c: [2]io.Closer{hot, cold}}, nil
}

// twoWalks reads one walk after the other.
type twoWalks struct {
	io.Reader
	c [2]io.Closer
}

func (w *twoWalks) Close() error { return errors.Join(w.c[0].Close(), w.c[1].Close()) }

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
