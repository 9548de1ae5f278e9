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
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// ColdMaps is how many cold maps idle sockets are spread over (COLD in
// tcpiter.c): a change walk visits one, so an idle socket is looked at
// every ColdMaps-th walk.
const ColdMaps = 8

// Tracker is a loaded tracked-mode iterator set for one namespace.
type Tracker struct {
	objs struct {
		Dump      *ebpf.Program `ebpf:"dump"`
		DumpTrack *ebpf.Program `ebpf:"dump_track"`
		Delta     *ebpf.Program `ebpf:"delta"`
		DeltaCold *ebpf.Program `ebpf:"delta_cold"`
		Track     *ebpf.Program `ebpf:"track"`
		Tracked   *ebpf.Map     `ebpf:"tracked"`
		Gone      *ebpf.Map     `ebpf:"gone"`
		// Globals in the reader's memory (no system call per sample).
		LostGone  *ebpf.Variable `ebpf:"lost_gone"`
		SampleNo  *ebpf.Variable `ebpf:"sample_no"`
		Untracked *ebpf.Variable `ebpf:"untracked"`
		Cold0     *ebpf.Map      `ebpf:"cold0"`
		Cold1     *ebpf.Map      `ebpf:"cold1"`
		Cold2     *ebpf.Map      `ebpf:"cold2"`
		Cold3     *ebpf.Map      `ebpf:"cold3"`
		Cold4     *ebpf.Map      `ebpf:"cold4"`
		Cold5     *ebpf.Map      `ebpf:"cold5"`
		Cold6     *ebpf.Map      `ebpf:"cold6"`
		Cold7     *ebpf.Map      `ebpf:"cold7"`
		FirstRecs *ebpf.Map      `ebpf:"first_recs"` // first.go
	}
	first       *link.Iter // dump: a full walk that tracks nothing
	firstMem    []byte     // first_recs, mapped (nil: no slots; first.go)
	full, delta *link.Iter
	cold        [ColdMaps]*link.Iter // delta_cold on each cold map
	hook        link.Link
	ring        *ringbuf.Reader
	lost        uint64 // lost count already seen
	walks       uint32 // delta walks so far
	two         twoWalks
	prefetch    bool // the full walks' programs touch the next socket
}

// LoadTracker loads and attaches the tracked mode for the namespace whose
// inode number is netns (the one Full will be opened in). It needs, beyond
// Load, sk_storage from tracing programs (5.11), the sk_storage map
// iterator and tp_btf; the caller falls back to Load without them.
func LoadTracker(c Config, netns uint32) (t *Tracker, err error) {
	if err := haveMapIter(); err != nil {
		return nil, err
	}
	t = &Tracker{}
	t.prefetch, err = loadVariant(c, netns, func(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions) error {
		return spec.LoadAndAssign(&t.objs, opts)
	})
	if err != nil {
		return nil, notSupported(fmt.Errorf("load tcp tracker: %w", err))
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
	if t.first, err = link.AttachIter(link.IterOptions{Program: t.objs.Dump}); err != nil {
		return nil, fmt.Errorf("attach tcp tracker first walk: %w", err)
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
	if err := t.mapFirst(); err != nil {
		return nil, err
	}
	t.ring.SetDeadline(time.Unix(0, 1)) // never wait: Gone drains what is there
	return t, nil
}

// Prefetching says whether the full walks' programs touch the next
// socket (Config.Prefetch).
func (t *Tracker) Prefetching() bool { return t.prefetch }

// Close detaches and unloads everything.
func (t *Tracker) Close() error {
	errs := []error{t.FreeFirst()}
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
	for _, p := range []*ebpf.Program{o.DumpTrack, o.Delta, o.DeltaCold, o.Track} { // Dump: FreeFirst
		if p != nil {
			cs = append(cs, p)
		}
	}
	for _, m := range append([]*ebpf.Map{o.Tracked, o.Gone}, t.coldMaps()...) { // FirstRecs: FreeFirst
		if m != nil {
			cs = append(cs, m)
		}
	}
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

// OpenFirst starts a full walk of the calling thread's namespace (which
// must be the tracker's) that tracks nothing: every matching socket, as
// OpenFull reports it, without creating its storage (which costs the
// walk ~0.8 us a socket). Call SetUntracked(true) before, and until an
// OpenFull walk has ended. Read it with ReadFirst (the records may be
// in the first-walk slots), one walk at a time.
func (t *Tracker) OpenFirst() (io.ReadCloser, error) {
	if t.first == nil {
		return nil, errors.New("open tcp tracker first walk: freed (FreeFirst)")
	}
	if err := t.resetFirst(); err != nil {
		return nil, err
	}
	r, err := openWalk(t.first)
	if err != nil {
		return nil, fmt.Errorf("open tcp tracker first walk: %w", err)
	}
	return r, nil
}

// SetUntracked says whether sockets the reader holds may be untracked
// (between an OpenFirst walk and the end of an OpenFull walk): while
// they may, Gone also reports the cookies of sockets without storage that
// leave the reported states.
func (t *Tracker) SetUntracked(on bool) error {
	var v uint32
	if on {
		v = 1
	}
	if err := t.objs.Untracked.Set(v); err != nil {
		return fmt.Errorf("tcp tracker untracked flag: %w", err)
	}
	return nil
}

// coldMaps are the cold maps, in cookie % ColdMaps order.
func (t *Tracker) coldMaps() []*ebpf.Map {
	o := &t.objs
	return []*ebpf.Map{o.Cold0, o.Cold1, o.Cold2, o.Cold3, o.Cold4, o.Cold5, o.Cold6, o.Cold7}
}

// OpenDelta starts a walk of the tracked sockets: records of those that
// changed since their last record, RecGone for those that stopped matching.
// It walks the hot map (sockets active in their last 10 looks) and one of
// the ColdMaps cold maps in turn, so an idle socket is looked at every
// ColdMaps-th walk (activity on it shows up to ColdMaps-1 walks late; a
// state change moves it back to the hot map at once). A socket with no activity since it was
// last looked at (no segment in or out, no read or write, same state and
// lane) is skipped after reading its activity counters; every field of
// each socket is compared about every 48 walks, staggered by cookie (what
// changes without activity, such as a buffer size set by the application,
// is seen then).
func (t *Tracker) OpenDelta() (io.ReadCloser, error) {
	t.walks++
	if err := t.objs.SampleNo.Set(t.walks); err != nil {
		return nil, fmt.Errorf("tcp tracker walk number: %w", err)
	}
	hot, err := openWalk(t.delta)
	if err != nil {
		return nil, fmt.Errorf("open tcp tracker delta: %w", err)
	}
	cold, err := openWalk(t.cold[t.walks%ColdMaps])
	if err != nil {
		hot.Close()
		return nil, fmt.Errorf("open tcp tracker cold delta: %w", err)
	}
	t.two = twoWalks{hot: hot, cold: cold}
	return &t.two, nil
}

// walk is one walk of an iterator read with plain system calls: a
// sample opens two, and link.Iter.Open's os.File costs more than the
// empty walk of an idle map (a fcntl, the poller's check, a cleanup).
type walk int

// openWalk starts a walk of l.
func openWalk(l *link.Iter) (walk, error) {
	attr := struct{ linkFD, flags uint32 }{uint32(l.FD()), 0}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_ITER_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return -1, errno
	}
	unix.CloseOnExec(int(fd))
	return walk(fd), nil
}

func (w walk) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(w), b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// readRaw is Read without the Go runtime's system call bookkeeping
// (RawSyscall): for a reader goroutine that runs beside another busy one
// (ReadAhead). A read of a walk never waits, it walks (at most 32 KiB of
// records, ~0.15 ms); as a system call the runtime's monitor would take
// the goroutine's P away during each one (none was idle) and hand it
// back after, polling every 20 us all the while.
func (w walk) readRaw(b []byte) (int, error) {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(w), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return 0, errno
		case n == 0:
			return 0, io.EOF
		}
		return int(n), nil
	}
}

func (w walk) Close() error { return unix.Close(int(w)) }

// twoWalks reads the hot walk, then the cold one.
type twoWalks struct{ hot, cold walk }

func (w *twoWalks) Read(b []byte) (int, error) {
	if w.hot >= 0 {
		n, err := w.hot.Read(b)
		if err != io.EOF {
			return n, err
		}
		w.hot.Close()
		w.hot = -1
	}
	if w.cold < 0 {
		return 0, io.EOF
	}
	return w.cold.Read(b)
}

func (w *twoWalks) Close() error {
	var errs []error
	for _, x := range []*walk{&w.hot, &w.cold} {
		if *x >= 0 {
			errs = append(errs, x.Close())
			*x = -1
		}
	}
	return errors.Join(errs...)
}

// Gone calls fn with the cookie of every reported socket that closed since
// the last call. resync is true if the ring had no room for some: the
// caller must then rebuild its view with a full walk.
func (t *Tracker) Gone(fn func(cookie uint64)) (resync bool, err error) {
	var rec ringbuf.Record
	for t.ring.AvailableBytes() > 0 { // no system call when it is empty
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
	if err := t.objs.LostGone.Get(&n); err != nil {
		return false, fmt.Errorf("tcp tracker lost count: %w", err)
	}
	resync = n != t.lost
	t.lost = n
	return resync, nil
}

// haveMapIter: nil if the kernel loads an sk_storage map iterator program
// (5.9+). The delta walks are such programs; where the kernel refuses them
// (before 5.9, or a kernel that refuses every map element iterator, with
// EPERM, as some sandboxed 6.18 builds do), the tracked mode is a missing
// feature and the caller falls back to Load.
func haveMapIter() error {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceIter, AttachTo: "bpf_sk_storage_map", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("%w: sk_storage map iterator: %w", ebpf.ErrNotSupported, err)
	}
	return p.Close()
}
