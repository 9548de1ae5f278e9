// qdisc.go: the deadline experiment's kernel path, configuration "qdisc":
// the paper's flows through the realtime lane's EDF as a BPF qdisc
// (internal/bpf/edfqdisc) at the root of the bed's sender egress, installed
// by the lab (the daemon keeps its HTB tree), shaped at 0.95 R like the
// lanes tree; each flow sends on its own plain UDP socket with SO_TXTIME
// (the deadline) and IP_RECVERR (a refusal is ENOBUFS from sendmsg), put
// in the realtime lane by the lanes classifier on tcx egress. The run is
// paired with the daemon path (configuration "lanes": same flows, bulk and
// schedule) and compared by ratio (pairTable).
package deadline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/edfqdisc"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lane"
)

// qdiscSkip is why the kernel path cannot run here ("" when it can).
func qdiscSkip() string {
	if err := edfqdisc.Supported(); err != nil {
		return err.Error()
	}
	return ""
}

// openQdisc loads the EDF qdisc shaped at 0.95 R, installs it at the root
// of dl0 and attaches the lanes classifier on dl0's tcx egress; the
// flows' sockets are put in its realtime lane as they open (s.qdFlow).
// All of it is undone by s.close.
func (b *dlBed) openQdisc(s *dlSenders) error {
	if err := rlimit.RemoveMemlock(); err != nil {
		return err
	}
	id := structops.Name("lanes_dl", b.t.ID)
	var cls *classifier.ClassifierObjects
	return b.snd.Do(func() (err error) {
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		q, err := edfqdisc.Load(id, edfqdisc.Config{Rate: b.rate * 95 / 100, Budget: 10 * time.Millisecond, Shaped: true}, structops.Auto)
		if err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, func() { _ = q.Close() })
		if err := q.Install(l); err != nil {
			return fmt.Errorf("install %s at the root of %s: %w", id, dlDevS, err)
		}
		s.cleanup = append(s.cleanup, func() { _ = b.snd.Do(func() error { return q.Uninstall(l) }) })
		s.qd = q
		if cls, err = classifier.Load(classifier.Config{}); err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, func() { cls.Close() })
		tcx, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: cls.LanesClassify, Attach: ebpf.AttachTCXEgress})
		if err != nil {
			return fmt.Errorf("classifier on tcx egress: %w", err)
		}
		s.cleanup = append(s.cleanup, func() { tcx.Close() })
		s.qdFlow = func(src, dst netip.AddrPort) error {
			return cls.PutFlow(classifier.FlowKey(netip.Addr{}, dst.Addr(), dst.Port(), src.Port(), unix.IPPROTO_UDP), lane.Realtime)
		}
		return nil
	})
}

// newTxtimeSender is a plain UDP socket of snd (TX timestamps as
// newUDPSender's) with SO_TXTIME on CLOCK_MONOTONIC and IP_RECVERR,
// connected to dst; put reports its own address.
func (b *dlBed) newTxtimeSender(dst netip.AddrPort, put func(src, dst netip.AddrPort) error) (*udpSender, error) {
	s, err := b.newUDPSender(0)
	if err != nil {
		return nil, err
	}
	s.txtime = true
	var opt [8]byte // struct sock_txtime { clockid_t clockid; __u32 flags; }
	binary.NativeEndian.PutUint32(opt[0:], unix.CLOCK_MONOTONIC)
	if err := unix.SetsockoptString(s.fd, unix.SOL_SOCKET, unix.SO_TXTIME, string(opt[:])); err != nil {
		s.close()
		return nil, fmt.Errorf("SO_TXTIME: %w", err)
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_IP, unix.IP_RECVERR, 1); err != nil {
		s.close()
		return nil, fmt.Errorf("IP_RECVERR: %w", err)
	}
	if err := unix.Connect(s.fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil {
		s.close()
		return nil, err
	}
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		s.close()
		return nil, err
	}
	in, _ := sa.(*unix.SockaddrInet4)
	if in == nil {
		s.close()
		return nil, errors.New("sender socket is not IPv4")
	}
	if err := put(netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port)), dst); err != nil {
		s.close()
		return nil, fmt.Errorf("classifier flow: %w", err)
	}
	return s, nil
}

// sendTxtime sends payload on the connected socket fd with deadline d
// (CLOCK_MONOTONIC ns) in SCM_TXTIME.
func sendTxtime(fd int, payload []byte, d int64) error {
	oob := make([]byte, unix.CmsgSpace(8))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TXTIME
	h.SetLen(unix.CmsgLen(8))
	binary.NativeEndian.PutUint64(oob[unix.CmsgLen(0):], uint64(d))
	return unix.Sendmsg(fd, payload, oob, nil, 0)
}

// qdiscNote is the qdisc's counters after a run, and how many refusals
// the senders saw as ENOBUFS (refused): one refused at enqueue that
// sendmsg did not report counts as lost.
func qdiscNote(q *edfqdisc.Qdisc, refused int) string {
	s, err := q.Stats()
	if err != nil {
		return "qdisc: " + err.Error()
	}
	r := lane.Realtime
	return fmt.Sprintf("qdisc: realtime enqueued %d, dequeued %d, refused at enqueue %d (sendmsg returned ENOBUFS for %d), dropped late at dequeue %d (they count as lost); interactive (bulk) enqueued %d, its FIFO full %d times",
		s.Enqueued[r], s.Dequeued[r], s.Refused[1]+s.Refused[2]+s.Refused[3]+s.Refused[4], refused, s.Late, s.Enqueued[lane.Interactive], s.FIFOFull)
}

// The measures of pairTable and what each is for either path.
// pairMeasureNames are pairTable's rows (pairValues' measures).
var pairMeasureNames = []string{"residence", "send call -> receiver kernel", "total"}

// pairMeasure is what each side of a pair table measures for one row.
type pairMeasure struct{ a, b string }

// pairMeasures: the daemon path's and the kernel path's.
var pairMeasures = []pairMeasure{
	{"rtlane admission -> its release into the kernel (sendto to the HTB tree not included)",
		"TX_SCHED (entering the qdisc) -> TX_SOFTWARE (veth transmit), the socket's SO_TIMESTAMPING"},
	{"client's send call -> receiver's SO_TIMESTAMPNS", "sendmsg call -> receiver's SO_TIMESTAMPNS"},
	{"client's send call -> receiver's recvmsg return", "sendmsg call -> receiver's recvmsg return"},
}

// pairValues are one run's delivered datagrams' values of measure i, µs,
// sorted.
func pairValues(r *dlRun, i int) []float64 {
	var v []float64
	for _, x := range r.Records {
		if x.Refused != "" || x.Dropped || x.Arrive == 0 {
			continue
		}
		switch i {
		case 0:
			if x.Enqueue != 0 && x.Dequeue != 0 {
				v = append(v, float64(x.Dequeue-x.Enqueue)/1e3)
			}
		case 1:
			v = append(v, float64(x.Arrive-x.Send)/1e3)
		default:
			v = append(v, float64(x.Receive-x.Send)/1e3)
		}
	}
	sort.Float64s(v)
	return v
}

// meanP99Max of sorted v (NaN when empty).
func meanP99Max(v []float64) (mean, p99, mx float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	for _, x := range v {
		mean += x
	}
	return mean / float64(len(v)), testbed.Percentile(v, 99), v[len(v)-1]
}

// pairTable compares configuration b with a of the same run, both flows
// together: mean, p99 and max of each measure and the ratios b ÷ a of mean
// and p99. measures, when given, adds what each side measures.
func pairTable(title, aName, bName string, a, b *dlRun, measures []pairMeasure) testbed.Table {
	cols := []string{"measure"}
	if measures != nil {
		cols = append(cols, aName+" measures", bName+" measures")
	}
	for _, n := range []string{aName, bName} {
		cols = append(cols, n+" n", n+" mean", n+" p99", n+" max")
	}
	t := testbed.Table{Title: title, Columns: append(cols, bName+" ÷ "+aName+" mean", bName+" ÷ "+aName+" p99")}
	for i, m := range pairMeasureNames {
		av, bv := pairValues(a, i), pairValues(b, i)
		am, ap, ax := meanP99Max(av)
		bm, bp, bx := meanP99Max(bv)
		row := []string{m}
		if measures != nil {
			row = append(row, measures[i].a, measures[i].b)
		}
		t.Rows = append(t.Rows, append(row, fmt.Sprint(len(av)), fmtUS(am), fmtUS(ap), fmtUS(ax),
			fmt.Sprint(len(bv)), fmtUS(bm), fmtUS(bp), fmtUS(bx), fmtRatio(bm/am), fmtRatio(bp/ap)))
	}
	return t
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3f", r)
}
