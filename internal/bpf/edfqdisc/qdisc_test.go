// qdisc_test.go checks the EDF qdisc in a kernel that has BPF qdiscs (the
// 7.2 VM: KERNEL=7.2 scripts/kernel-vm.sh ./internal/bpf/edfqdisc/); on a
// kernel without them each test skips naming the reason. A plain UDP
// socket with only SO_TXTIME and IP_RECVERR, in a namespace of its own,
// sends through the qdisc at the root of its veth, classified realtime by
// the lanes classifier on the egress hook: admitted datagrams leave in
// deadline order, infeasible ones are refused with ENOBUFS by sendmsg.
package edfqdisc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/edf"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func requireQdisc(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if err := Supported(); err != nil {
		t.Skipf("BPF qdisc: %v", err)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
}

func TestProbe(t *testing.T) {
	requireQdisc(t)
	if err := Probe(); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if _, err := Load("lanes_bad id", Config{Rate: 1e9, Budget: time.Millisecond}, structops.Auto); err == nil {
		t.Error("an id with a space was accepted")
	}
	if _, err := Load("lanes_q0", Config{Budget: time.Millisecond}, structops.Auto); err == nil {
		t.Error("a zero rate was accepted")
	}
}

// txtimeSender is a UDP socket of the sending namespace with SO_TXTIME
// (CLOCK_MONOTONIC, deadline taken from each datagram's SCM_TXTIME) and
// IP_RECVERR, connected to dst.
type txtimeSender struct{ fd int }

func newTxtimeSender(src, dst netip.AddrPort) (*txtimeSender, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	s := &txtimeSender{fd: fd}
	// struct sock_txtime { clockid_t clockid; __u32 flags; }
	var opt [8]byte
	binary.NativeEndian.PutUint32(opt[0:], unix.CLOCK_MONOTONIC)
	if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_TXTIME, string(opt[:])); err != nil {
		s.Close()
		return nil, fmt.Errorf("SO_TXTIME: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_RECVERR, 1); err != nil {
		s.Close()
		return nil, fmt.Errorf("IP_RECVERR: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.Addr().As4(), Port: int(src.Port())}); err != nil {
		s.Close()
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// send sends payload with deadline d (CLOCK_MONOTONIC ns) in SCM_TXTIME.
func (s *txtimeSender) send(payload []byte, d int64) error {
	oob := make([]byte, unix.CmsgSpace(8))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TXTIME
	h.SetLen(unix.CmsgLen(8))
	binary.NativeEndian.PutUint64(oob[unix.CmsgLen(0):], uint64(d))
	return unix.Sendmsg(s.fd, payload, oob, nil, 0)
}

func (s *txtimeSender) Close() error { return unix.Close(s.fd) }

func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// TestTxtimeEDF: shaped at 20 kbit/s, a 1,000-byte datagram (1,042 bytes
// with its UDP, IP and Ethernet headers) takes T = 417 ms on the wire, so
// datagrams sent back to back queue in the qdisc behind the first, which
// leaves at once. Deadlines in units of T after the first sendmsg
// returned: 18 (the first), 16, 12, 8, 5, then 2.5 (the tight one); they
// leave in deadline order after the first. A datagram with deadline 1.5
// sent before the tight one cannot make its own deadline (it would finish
// at 2 at the earliest); one with 2.4 sent after it would make the tight
// one late: both are refused with ENOBUFS by sendmsg itself. (Margins of
// at least T/2 as long as the first sendmsg takes less than T/2.)
func TestTxtimeEDF(t *testing.T) {
	requireQdisc(t)
	p := testutil.NewVethPair(t)
	const rate, size, dport, sport = 20_000, 1000, 9100, 9101
	T := int64(size+42) * 8 * int64(time.Second) / rate
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.AddrA.To4())), sport)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.AddrB.To4())), dport)

	recv, q, send := setupPath(t, p, src, dst, rate)
	payload := make([]byte, size)
	send1 := func(seq byte, d int64) error {
		payload[0] = seq
		return send.send(payload, d)
	}
	ta := monotonic()
	if err := send1(0, ta+18*T); err != nil {
		t.Fatalf("datagram 0: %v", err)
	}
	tb := monotonic()
	at := func(units float64) int64 { return tb + int64(units*float64(T)) }
	for i, u := range []float64{16, 12, 8, 5} {
		if err := send1(byte(i+1), at(u)); err != nil {
			t.Fatalf("datagram %d (deadline %v T): %v", i+1, u, err)
		}
	}
	refused := func(u float64, what string) {
		if err := send1(0xff, at(u)); !errors.Is(err, unix.ENOBUFS) {
			t.Errorf("deadline %v T (%s): sendmsg returned %v, want ENOBUFS", u, what, err)
		}
	}
	refused(1.5, "cannot make its own deadline")
	if err := send1(5, at(2.5)); err != nil {
		t.Fatalf("datagram 5 (deadline 2.5 T): %v", err)
	}
	refused(2.4, "would make the 2.5 T one late")
	if d := monotonic() - ta; tb-ta > T/2 || d > T {
		t.Fatalf("the first sendmsg took %v, all of them %v: the test needs < T/2 and < T (T = %v)",
			time.Duration(tb-ta), time.Duration(d), time.Duration(T))
	}

	want := []byte{0, 5, 4, 3, 2, 1}
	var got []byte
	buf := make([]byte, 2*size)
	_ = recv.SetReadDeadline(time.Now().Add(testutil.Patience(10 * time.Second)))
	for len(got) < len(want) {
		n, from, err := recv.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("received %v, then: %v", got, err)
		}
		if from != src {
			t.Errorf("datagram from %v, want the sender's own %v", from, src)
		}
		if n != size {
			t.Errorf("datagram of %d bytes, want %d", n, size)
		}
		got = append(got, buf[0])
	}
	if string(got) != string(want) {
		t.Errorf("received in order %v, want %v (deadline order after the first)", got, want)
	}
	s, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", s)
	r := lane.Realtime
	if s.Enqueued[r] != 6 || s.Dequeued[r] != 6 || s.Late != 0 || s.Lost != 0 ||
		s.Refused[edf.OwnDeadline] != 1 || s.Refused[edf.Displaces] != 1 {
		t.Errorf("counters %+v: want 6 realtime enqueued and dequeued, one refusal of each kind, none late or lost", s)
	}
}

// setupPath opens the receiver in p.B and, in p.A, loads the qdisc shaped
// at rate, installs it at the root of p.LinkA, puts src -> dst (UDP) in the
// classifier's realtime lane, attaches the classifier on tcx egress and
// opens the SO_TXTIME sender; all undone when the test ends.
func setupPath(t *testing.T, p *testutil.Pair, src, dst netip.AddrPort, rate uint64) (*net.UDPConn, *Qdisc, *txtimeSender) {
	t.Helper()
	var recv *net.UDPConn
	p.B.Do(t, func() (err error) {
		recv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(dst))
		return err
	})
	t.Cleanup(func() { recv.Close() })
	id := structops.Name("edfq-test", t.Name())
	var (
		q    *Qdisc
		cls  *classifier.ClassifierObjects
		tcx  link.Link
		send *txtimeSender
	)
	t.Cleanup(func() {
		if send != nil {
			send.Close()
		}
		if tcx != nil {
			tcx.Close()
		}
		if cls != nil {
			cls.Close()
		}
		if q == nil {
			return
		}
		_ = p.A.Run(func() error {
			l, err := netlink.LinkByName(p.LinkA)
			if err != nil {
				return err
			}
			return q.Uninstall(l)
		})
		if err := q.Close(); err != nil {
			t.Error(err)
		}
	})
	p.A.Do(t, func() (err error) {
		if q, err = Load(id, Config{Rate: rate, Budget: 50 * time.Millisecond, Shaped: true}, structops.Auto); err != nil {
			return err
		}
		l, err := netlink.LinkByName(p.LinkA)
		if err != nil {
			return err
		}
		if err := q.Install(l); err != nil {
			return fmt.Errorf("install %s at the root of %s: %w", id, p.LinkA, err)
		}
		if cls, err = classifier.Load(classifier.Config{}); err != nil {
			return err
		}
		key := classifier.FlowKey(netip.Addr{}, dst.Addr(), dst.Port(), src.Port(), unix.IPPROTO_UDP)
		if err := cls.PutFlow(key, lane.Realtime); err != nil {
			return err
		}
		if tcx, err = link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: cls.LanesClassify, Attach: ebpf.AttachTCXEgress}); err != nil {
			return fmt.Errorf("classifier on tcx egress: %w", err)
		}
		send, err = newTxtimeSender(src, dst)
		return err
	})
	return recv, q, send
}

// TestLateReported: behind a first datagram that occupies the link for T,
// datagrams are sent with deadlines rising from the earliest possible in
// 20 us steps until one is admitted: it has at most 20 us of slack, and the
// qdisc watchdog that wakes the queue when the first is done fires later
// than that in the VM, so it is dropped late at dequeue and reported on
// the ring buffer with its deadline and the socket's ports, never sent.
// (Where the watchdog is faster than the slack it is sent on time; the test
// then skips, naming that.)
func TestLateReported(t *testing.T) {
	requireQdisc(t)
	p := testutil.NewVethPair(t)
	const rate, size, dport, sport = 20_000, 1000, 9102, 9103
	T := int64(size+42) * 8 * int64(time.Second) / rate
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.AddrA.To4())), sport)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.AddrB.To4())), dport)
	recv, q, send := setupPath(t, p, src, dst, rate)
	payload := make([]byte, size)
	ta := monotonic()
	if err := send.send(payload, ta+10*T); err != nil {
		t.Fatalf("first datagram: %v", err)
	}
	// The first leaves at once and ends at busy >= ta + T; a second of
	// deadline D is admitted iff D - T >= busy.
	var d int64
	tries := 0
	for d = ta + 2*T; ; d += 20_000 {
		tries++
		payload[0] = 1
		err := send.send(payload, d)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOBUFS) || monotonic()-ta > T/2 {
			t.Fatalf("probe %d (deadline ta + %v): %v", tries, time.Duration(d-ta), err)
		}
	}
	t.Logf("admitted after %d probes, deadline ta + %v", tries, time.Duration(d-ta))
	l, err := q.ReadLate(time.Now().Add(testutil.Patience(10 * time.Second)))
	s, serr := q.Stats()
	if serr != nil {
		t.Fatal(serr)
	}
	t.Logf("stats %+v", s)
	if errors.Is(err, os.ErrDeadlineExceeded) && s.Dequeued[lane.Realtime] == 2 && s.Late == 0 {
		t.Skip("the watchdog fired within the admitted datagram's slack: it was sent on time")
	}
	if err != nil {
		t.Fatalf("no late report: %v", err)
	}
	if l.Deadline != d || l.SrcPort != sport || l.DstPort != dport || l.Len != size+42 || l.Now-l.Deadline+l.Tx <= 0 {
		t.Errorf("late report %+v: want deadline %d, ports %d -> %d, length %d, late", l, d, sport, dport, size+42)
	}
	if s.Late != 1 || s.Dequeued[lane.Realtime] != 1 {
		t.Errorf("counters %+v: want one late, one sent", s)
	}
	// Only the first datagram arrives.
	buf := make([]byte, 2*size)
	_ = recv.SetReadDeadline(time.Now().Add(testutil.Patience(2 * time.Second)))
	if n, _, err := recv.ReadFromUDPAddrPort(buf); err != nil || n != size || buf[0] != 0 {
		t.Fatalf("first datagram: %d bytes (seq %d), %v", n, buf[0], err)
	}
	if _, _, err := recv.ReadFromUDPAddrPort(buf); err == nil {
		t.Errorf("the late datagram (seq %d) was sent", buf[0])
	}
}

// TestOneInstance: all the qdisc's state is global, so a registration
// serves one interface; a second instance (the other end of the veth) is
// refused, and the first one keeps working afterwards.
func TestOneInstance(t *testing.T) {
	requireQdisc(t)
	p := testutil.NewVethPair(t)
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.AddrA.To4())), 9104)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.AddrB.To4())), 9105)
	recv, q, send := setupPath(t, p, src, dst, 1e9)
	err := p.B.Run(func() error {
		l, err := netlink.LinkByName(p.LinkB)
		if err != nil {
			return err
		}
		if err := q.Install(l); err == nil {
			_ = q.Uninstall(l)
			return errors.New("a second instance was created")
		} else if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("second instance: %v, want EBUSY", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := send.send(make([]byte, 100), monotonic()+int64(time.Second)); err != nil {
		t.Fatalf("after the refused instance: %v", err)
	}
	_ = recv.SetReadDeadline(time.Now().Add(testutil.Patience(5 * time.Second)))
	if n, _, err := recv.ReadFromUDPAddrPort(make([]byte, 200)); err != nil || n != 100 {
		t.Fatalf("after the refused instance: received %d bytes, %v", n, err)
	}
}
