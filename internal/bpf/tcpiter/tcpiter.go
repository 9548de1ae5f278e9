// tcpiter.go: loading the iterator and reading its records.
package tcpiter

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Record kinds (Rec.Kind).
const (
	RecSock = 0 // a full socket
	RecReq  = 1 // a request socket: addresses and cookie only
	RecGone = 2 // tracked mode: the socket (Cookie) no longer matches
)

// Rec is one socket's record (struct tcp_rec in tcpiter.c).
type Rec = TcpiterTcpRec

// RecSize is the size of one record in the stream.
const RecSize = int(unsafe.Sizeof(Rec{}))

// Config selects the sockets the iterator reports.
type Config struct {
	States uint32 // bit per TCP state (1 << TCP_ESTABLISHED, ...)
	// LaneMap is the daemon's socket cookie -> lane map (the datapath's
	// lanes_cookie); nil: no lanes (Rec.Lane stays 0, Lanes is ignored).
	LaneMap *ebpf.Map
	Lanes   uint32 // bit per lane to report (1 << lane); 0: all
	// Only sockets with this local, remote or either port (0: any), and
	// in this cgroup v2 (its id; 0: any; kernels before 5.15 report no
	// cgroup, so a cgroup filter matches nothing there).
	LocalPort, RemotePort, Port uint16
	CgroupID                    uint64
	// FirstSlots (tracked mode only): how many records of the first
	// walk (Tracker.OpenFirst) the kernel writes into memory the reader
	// maps (Tracker.ReadFirst) instead of the walk's stream, which takes
	// those beyond; 0: none. The memory, RecSize bytes a slot, is held
	// from LoadTracker until Tracker.FreeFirst.
	FirstSlots int
	// Prefetch chooses the walk programs (iter/tcp): with the touches of
	// the next socket (prefetch_next in tcpiter.c: the walk ~10 % quicker
	// on a 100,000-socket namespace) or without. The zero
	// value, PrefetchAuto, is the monitor's: with where the kernel verifies
	// them, else without.
	Prefetch Prefetch
}

// Prefetch selects the walk programs' variant (Config.Prefetch).
type Prefetch int

const (
	// PrefetchAuto: the touches where the kernel takes them (bpf_rdonly_cast
	// of untyped memory, the established table's layout), else the program
	// without them.
	PrefetchAuto Prefetch = iota
	// PrefetchOn: the touches or an error.
	PrefetchOn
	// PrefetchOff: the program without the touches.
	PrefetchOff
)

// variants are the programs' variants a load tries in turn for p: with the
// touches (true), without (false).
func (p Prefetch) variants() []bool {
	switch p {
	case PrefetchOn:
		return []bool{true}
	case PrefetchOff:
		return []bool{false}
	}
	return []bool{true, false}
}

// loadVariant loads c's objects with load, trying the walk programs'
// variants of c.Prefetch in turn: which one loaded (true: the touches), or
// the last variant's error.
func loadVariant(c Config, netns uint32, load func(*ebpf.CollectionSpec, *ebpf.CollectionOptions) error) (bool, error) {
	var err error
	cache := btf.NewCache() // the kernel's BTF parsed once for all attempts
	for _, on := range c.Prefetch.variants() {
		if on {
			if err = haveRdonlyCast(cache); err != nil {
				continue
			}
		}
		var spec *ebpf.CollectionSpec
		var opts *ebpf.CollectionOptions
		spec, opts, err = loadSpec(c, netns, on)
		if err != nil {
			return false, err
		}
		opts.Cache = cache
		if err = load(spec, opts); err == nil {
			return on, nil
		}
	}
	return false, err
}

// haveRdonlyCast: nil if the kernel has the kfunc bpf_rdonly_cast (6.2),
// without which the walk program's touches (a weak reference to it) are
// left out at load, the variant with them doing nothing more than the
// one without.
func haveRdonlyCast(cache *btf.Cache) error {
	spec, err := cache.Kernel()
	if err != nil {
		return fmt.Errorf("%w: kernel BTF: %w", ebpf.ErrNotSupported, err)
	}
	var fn *btf.Func
	if err := spec.TypeByName("bpf_rdonly_cast", &fn); err != nil {
		return fmt.Errorf("%w: kfunc bpf_rdonly_cast (6.2): %w", ebpf.ErrNotSupported, err)
	}
	return nil
}

// Iter is a loaded, attached TCP iterator. Each Open starts a new walk.
type Iter struct {
	prog     *ebpf.Program
	link     *link.Iter
	prefetch bool // the walk program touches the next socket
}

// Load loads the program with c and attaches it as an iterator. It fails
// on kernels without iter/tcp, bpf_skc_to_tcp_sock or the tracing
// bpf_get_socket_cookie (before 5.12): the caller falls back to sock_diag.
func Load(c Config) (*Iter, error) {
	c.FirstSlots = 0 // every walk is read from the stream
	var progs struct {
		Dump *ebpf.Program `ebpf:"dump"`
	}
	on, err := loadVariant(c, 0, func(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions) error {
		return spec.LoadAndAssign(&progs, opts)
	})
	if err != nil {
		return nil, notSupported(fmt.Errorf("load tcp iterator: %w", err))
	}
	l, err := link.AttachIter(link.IterOptions{Program: progs.Dump})
	if err != nil {
		progs.Dump.Close()
		return nil, fmt.Errorf("attach tcp iterator: %w", err)
	}
	return &Iter{prog: progs.Dump, link: l, prefetch: on}, nil
}

// Prefetching says whether the walk program touches the next socket
// (Config.Prefetch).
func (it *Iter) Prefetching() bool { return it.prefetch }

// notSupported marks a load the verifier refused for a helper this kernel
// does not give tracing programs (bpf_get_socket_cookie before 5.12) as
// ebpf.ErrNotSupported: a missing kernel feature, not a defect.
func notSupported(err error) error {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		return err
	}
	for _, l := range ve.Log {
		if f, ok := strings.CutPrefix(l, "unknown func "); ok {
			return fmt.Errorf("%w: helper %s: %w", ebpf.ErrNotSupported, f, err)
		}
		// Before 5.12 an atomic exchange (emit in tcpiter.c) is refused
		// before any helper is looked at.
		if l == "BPF_STX uses reserved fields" {
			return fmt.Errorf("%w: BPF atomics (5.12): %w", ebpf.ErrNotSupported, err)
		}
	}
	return err
}

// loadSpec is the collection spec with c's settings; netns is the
// namespace's inode number (tracked mode only); prefetch: the walk
// programs touch the next socket.
func loadSpec(c Config, netns uint32, prefetch bool) (*ebpf.CollectionSpec, *ebpf.CollectionOptions, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, nil, err
	}
	spec, err := LoadTcpiter()
	if err != nil {
		return nil, nil, fmt.Errorf("tcp iterator spec: %w", err)
	}
	cfg := struct {
		States, Lanes, HaveLanes uint32
		LPort, RPort, Port, _    uint16
		NetNS                    uint32
		CgroupID                 uint64
		FirstSlots, Prefetch     uint32
	}{States: c.States, Lanes: c.Lanes, LPort: c.LocalPort, RPort: c.RemotePort, Port: c.Port, NetNS: netns, CgroupID: c.CgroupID}
	if prefetch {
		cfg.Prefetch = 1
	}
	if c.FirstSlots > 0 { // entry 0 is the count
		cfg.FirstSlots = uint32(min(c.FirstSlots, maxFirstSlots) + 1)
		spec.Maps["first_recs"].MaxEntries = cfg.FirstSlots
	}
	opts := &ebpf.CollectionOptions{}
	if c.LaneMap != nil {
		cfg.HaveLanes = 1
		opts.MapReplacements = map[string]*ebpf.Map{"lanes_cookie": c.LaneMap}
	} else {
		spec.Maps["lanes_cookie"].MaxEntries = 1 // referenced, never read
	}
	if err := spec.Variables["CFG"].Set(cfg); err != nil {
		return nil, nil, fmt.Errorf("tcp iterator config: %w", err)
	}
	return spec, opts, nil
}

// maxFirstSlots bounds Config.FirstSlots (64 MiB of records; the stream
// takes the rest).
const maxFirstSlots = 64 << 20 / RecSize

// Probe loads and attaches the iterator as the monitor would, then
// unloads it: nil if the monitor can sample through it on this kernel.
func Probe() error {
	it, err := Load(Config{States: 1 << 1})
	if err != nil {
		return err
	}
	return it.Close()
}

// Close detaches and unloads the iterator.
func (it *Iter) Close() error {
	return errors.Join(it.link.Close(), it.prog.Close())
}

// RunTime is the walk program's run time summed over its runs, where the
// kernel counts it (BPF_ENABLE_STATS on: benchmarks telling the program
// from the iteration around it).
func (it *Iter) RunTime() (time.Duration, error) {
	st, err := it.prog.Stats()
	if err != nil {
		return 0, err
	}
	return st.Runtime, nil
}

// Open starts a walk of the TCP sockets of the calling thread's network
// namespace (the kernel takes the namespace when the walk is opened).
func (it *Iter) Open() (io.ReadCloser, error) {
	r, err := it.link.Open()
	if err != nil {
		return nil, fmt.Errorf("open tcp iterator: %w", err)
	}
	return r, nil
}

// asRec is the record at the start of b (at least RecSize bytes, 8-byte
// aligned).
func asRec(b []byte) *Rec { return (*Rec)(unsafe.Pointer(&b[0])) }

// Reader reads records from a walk with one reusable buffer.
type Reader struct {
	buf  []byte
	have int // bytes of a partial record left from the last Some
}

// Each reads the walk r to its end and calls fn for every record; the
// record is valid only during the call.
func (rd *Reader) Each(r io.Reader, fn func(*Rec)) error {
	rd.Reset()
	_, err := rd.Some(r, -1, fn)
	return err
}

// Reset forgets a partial record of the last Some: the next call reads a
// new walk.
func (rd *Reader) Reset() { rd.have = 0 }

// Some reads the walk r on until at least n records (n < 0: all) were
// passed to fn or the walk ended (eof); a later call on the same walk goes
// on where it stopped. No read asks for more than the records still
// wanted, and the kernel walks only as far as a read asks, so a walk can
// be spread over several calls at a bounded cost each. The record is valid only during fn.
func (rd *Reader) Some(r io.Reader, n int, fn func(*Rec)) (eof bool, err error) {
	if len(rd.buf) == 0 {
		rd.buf = make([]byte, 256*RecSize)
	}
	done := 0
	for n < 0 || done < n {
		want := len(rd.buf)
		if n >= 0 {
			want = min(want, rd.have+(n-done)*RecSize) // ask the kernel for no more
		}
		k, err := r.Read(rd.buf[rd.have:want])
		rd.have += k
		off := 0
		for ; rd.have-off >= RecSize; off += RecSize {
			fn(asRec(rd.buf[off:]))
			done++
		}
		rd.have = copy(rd.buf, rd.buf[off:rd.have])
		if err == io.EOF || (k == 0 && err == nil) {
			if rd.have != 0 {
				return true, fmt.Errorf("tcp iterator: %d bytes of a partial record", rd.have)
			}
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read tcp iterator: %w", err)
		}
	}
	return false, nil
}

// ProbePrefetch loads the iterator with the walk program that touches the
// next socket (PrefetchOn), then unloads it: nil if the monitor's walks
// prefetch on this kernel (it verifies bpf_rdonly_cast of untyped memory,
// 6.17+, and has the established table's layout); otherwise they run
// without.
func ProbePrefetch() error {
	it, err := Load(Config{States: 1 << 1, Prefetch: PrefetchOn})
	if err != nil {
		return err
	}
	return it.Close()
}

// ProbeTracker loads the tracked mode as the monitor would, then unloads
// it: nil if the monitor can sample through it on this kernel.
func ProbeTracker() error {
	t, err := LoadTracker(Config{States: 1 << 1}, 0)
	if err != nil {
		return err
	}
	return t.Close()
}
