// edfqdisc.go loads the EDF qdisc (edfqdisc.c) with its rate, budget and
// mode, registers it under an id of the loader's choosing
// (internal/bpf/structops: a struct_ops bpf_link, or a map update) and
// installs it as the root qdisc of an interface; it reads its counters and
// its late-drop reports. Supported says whether the kernel has BPF qdiscs
// at all (Linux 6.16+, CONFIG_NET_SCH_BPF).
package edfqdisc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/structops"
)

// Config is what the qdisc is loaded with.
type Config struct {
	// Rate is the link rate in bit/s the transmit times are computed at
	// (and the sending rate when Shaped).
	Rate uint64
	// Budget is the deadline of a realtime packet that carries no
	// SO_TXTIME time: its enqueue time plus Budget.
	Budget time.Duration
	// Shaped sends at Rate (earliest departure times and the qdisc
	// watchdog); otherwise packets leave as fast as the device takes them.
	Shaped bool
}

// Qdisc is a loaded and registered EDF qdisc.
type Qdisc struct {
	ID   string
	Mode structops.Mode
	objs EdfqObjects
	reg  *structops.Registration
	late *ringbuf.Reader
}

// Stats are the qdisc's counters, indexed by lane (1 realtime, 2
// interactive, 3 background) and by refusal reason (edf.Reason; 4 is a
// full queue).
type Stats struct {
	Enqueued, Dequeued [4]uint64
	Refused            [5]uint64
	Late, FIFOFull     uint64
	Lost               uint64 // an empty slot where a packet was expected: a bug
}

// Late is one realtime packet dropped at dequeue because it could no
// longer finish by its deadline.
type Late struct {
	Deadline, Now, Tx int64 // CLOCK_MONOTONIC ns; Tx its time on the wire
	Len               uint32
	SrcPort           uint16 // the sending socket's local port
	DstPort           uint16 // its remote port (0: unconnected)
}

var (
	supOnce sync.Once
	supErr  error
)

// Supported is nil when this kernel runs BPF qdiscs: its BTF has the
// struct_ops type of Qdisc_ops (Linux 6.16+ with CONFIG_NET_SCH_BPF).
func Supported() error {
	supOnce.Do(func() {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			supErr = fmt.Errorf("kernel BTF: %w", err)
			return
		}
		var st *btf.Struct
		if spec.TypeByName("bpf_struct_ops_Qdisc_ops", &st) != nil {
			supErr = errors.New("no BPF qdisc in this kernel (Linux 6.16+ with CONFIG_NET_SCH_BPF)")
		}
	})
	return supErr
}

// Load loads the qdisc with cfg and registers it as id (structops' name
// rules: global, at most 15 bytes); `tc qdisc add ... root <id>` or
// Install then creates it on an interface. All its state is global: one
// registration serves one interface.
func Load(id string, cfg Config, mode structops.Mode) (*Qdisc, error) {
	if err := structops.CheckName(id); err != nil {
		return nil, err
	}
	if cfg.Rate == 0 || cfg.Budget <= 0 {
		return nil, fmt.Errorf("edfqdisc: rate %d and budget %v must be positive", cfg.Rate, cfg.Budget)
	}
	if err := Supported(); err != nil {
		return nil, err
	}
	spec, err := LoadEdfq()
	if err != nil {
		return nil, fmt.Errorf("edfqdisc: read object: %w", err)
	}
	if err := tagKptr(spec.Maps[EdfqMapLanesQdSlots]); err != nil {
		return nil, err
	}
	ms := spec.Maps[EdfqMapLanesEdfq]
	if err := setID(ms, id); err != nil {
		return nil, err
	}
	mode = mode.Resolve()
	if err := structops.Prepare(ms, id, mode); err != nil {
		return nil, err
	}
	c := EdfqEdfqConfig{RateBps: cfg.Rate, BudgetNs: uint64(cfg.Budget), HorizonNs: uint64(10 * time.Second), MinorBase: 0x10}
	if cfg.Shaped {
		c.Shaped = 1
	}
	if err := spec.Variables[EdfqVarCFG].Set(c); err != nil {
		return nil, fmt.Errorf("edfqdisc: set config: %w", err)
	}
	q := &Qdisc{ID: id, Mode: mode}
	if err := spec.LoadAndAssign(&q.objs, nil); err != nil {
		return nil, fmt.Errorf("edfqdisc: load %s: %w", id, err)
	}
	if q.reg, err = structops.Register(q.objs.LanesEdfq, id, mode); err != nil {
		q.objs.Close()
		return nil, fmt.Errorf("edfqdisc: register %s: %w", id, err)
	}
	if q.late, err = ringbuf.NewReader(q.objs.LanesQdLate); err != nil {
		q.Close()
		return nil, fmt.Errorf("edfqdisc: late reader: %w", err)
	}
	return q, nil
}

// tagKptr marks the slot's skb pointer as a referenced kptr in the map's
// BTF (PTR -> TYPE_TAG "kptr" -> sk_buff), what `__kptr` in edfqdisc.c
// says to a compiler that emits type tags: clang 14, the generator's, drops
// them, and the verifier then refuses bpf_kptr_xchg on the slot ("R1 has
// no valid kptr").
func tagKptr(ms *ebpf.MapSpec) error {
	if ms == nil {
		return errors.New("edfqdisc: object has no slot map")
	}
	st, ok := btf.As[*btf.Struct](ms.Value)
	if !ok {
		return fmt.Errorf("edfqdisc: slot value is %T", ms.Value)
	}
	for i, m := range st.Members {
		if m.Name != "skb" {
			continue
		}
		p, ok := m.Type.(*btf.Pointer)
		if !ok {
			return fmt.Errorf("edfqdisc: slot skb is %T", m.Type)
		}
		if _, tagged := p.Target.(*btf.TypeTag); !tagged {
			st.Members[i].Type = &btf.Pointer{Target: &btf.TypeTag{Value: "kptr", Type: p.Target}}
		}
		return nil
	}
	return errors.New("edfqdisc: slot has no skb member")
}

// setID writes id into the Qdisc_ops value's id field.
func setID(ms *ebpf.MapSpec, id string) error {
	if ms == nil || len(ms.Contents) != 1 {
		return errors.New("edfqdisc: object has no struct_ops value")
	}
	st, ok := btf.As[*btf.Struct](ms.Value)
	if !ok {
		return fmt.Errorf("edfqdisc: struct_ops value is %T", ms.Value)
	}
	val, ok := ms.Contents[0].Value.([]byte)
	if !ok {
		return fmt.Errorf("edfqdisc: struct_ops value is %T, not bytes", ms.Contents[0].Value)
	}
	for _, m := range st.Members {
		if m.Name != "id" {
			continue
		}
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return err
		}
		off := int(m.Offset.Bytes())
		if len(id) >= size || off+size > len(val) {
			return fmt.Errorf("edfqdisc: id %q does not fit %d bytes", id, size)
		}
		val = append([]byte(nil), val...)
		clear(val[off : off+size])
		copy(val[off:], id)
		ms.Contents[0].Value = val
		return nil
	}
	return errors.New("edfqdisc: Qdisc_ops has no id field")
}

// Install makes the qdisc the root of link (replacing what is there).
func (q *Qdisc) Install(link netlink.Link) error {
	return netlink.QdiscReplace(q.root(link))
}

// Uninstall removes the qdisc from link's root (the kernel puts its
// default qdisc back).
func (q *Qdisc) Uninstall(link netlink.Link) error {
	return netlink.QdiscDel(q.root(link))
}

func (q *Qdisc) root(link netlink.Link) *netlink.GenericQdisc {
	return &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)}, QdiscType: q.ID}
}

// Stats reads the counters.
func (q *Qdisc) Stats() (Stats, error) {
	var s EdfqEdfqStats
	if err := q.objs.Stats.Get(&s); err != nil {
		return Stats{}, fmt.Errorf("edfqdisc: stats: %w", err)
	}
	return Stats{Enqueued: s.Enqueued, Dequeued: s.Dequeued, Refused: s.Refused,
		Late: s.Late, FIFOFull: s.FifoFull, Lost: s.Lost}, nil
}

// ReadLate waits until deadline (zero: forever) for the next late-drop
// report; os.ErrDeadlineExceeded when none came.
func (q *Qdisc) ReadLate(deadline time.Time) (Late, error) {
	q.late.SetDeadline(deadline)
	rec, err := q.late.Read()
	if err != nil {
		return Late{}, err
	}
	var l EdfqEdfqLate
	if err := binary.Read(bytes.NewReader(rec.RawSample), binary.NativeEndian, &l); err != nil {
		return Late{}, fmt.Errorf("edfqdisc: late report: %w", err)
	}
	return Late{Deadline: l.Deadline, Now: l.Now, Tx: l.Tx, Len: l.Len, SrcPort: l.Sport, DstPort: l.Dport<<8 | l.Dport>>8}, nil
}

// Close unregisters the qdisc (the kernel refuses while an interface
// still uses it: Uninstall first) and frees its objects.
func (q *Qdisc) Close() error {
	if q == nil {
		return nil
	}
	var errs []error
	if q.late != nil {
		errs = append(errs, q.late.Close())
	}
	if q.reg != nil {
		if err := q.reg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("edfqdisc: unregister %s: %w", q.ID, err))
		}
	}
	if err := q.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("edfqdisc: close %s: %w", q.ID, err))
	}
	return errors.Join(errs...)
}

// ProbePrefix starts Probe's scratch ids ("lanes_q" and the pid in hex).
const ProbePrefix = "lanes_q"

// Probe loads, registers and unregisters the qdisc under a scratch id: nil
// when this kernel can run it.
func Probe() error {
	q, err := Load(fmt.Sprintf("%s%x", ProbePrefix, os.Getpid()), Config{Rate: 1e9, Budget: time.Millisecond}, structops.Auto)
	if err != nil {
		return err
	}
	return q.Close()
}
