// iter.go: the BPF iterator sampling backend (internal/bpf/tcpiter). The
// kernel writes one record of raw struct tcp_sock fields per socket into
// one read stream; here each record becomes the Sock that sock_diag would
// have produced, with the arithmetic of the kernel's tcp_get_info and
// tcp_diag_get_info, so the rest of the sampler (filters, process, rates)
// does not know which backend ran.
//
// Note: the iterator reports full sockets and request sockets (as SYN-RECV,
// addresses only, as sock_diag does), no TIME-WAIT (the default
// ConnectedStates has none), and for a LISTEN socket it reports the queues
// of a connection, not the accept backlog.
package tcpmon

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/sched"
)

// Backend names, as reported by Sampler.Backend.
const (
	BackendTrack = "bpf-track" // the iterator's tracked mode (track.go)
	BackendIter  = "bpf-iter"
	BackendDiag  = "sock_diag"
)

// iterSource samples a namespace through the TCP iterator.
type iterSource struct {
	it *tcpiter.Iter
	ns netns.NsHandle // borrowed; not open: the caller's namespace
	rd tcpiter.Reader
	recConv
}

// recConv turns iterator records into Socks.
type recConv struct {
	usPerJ  uint64 // microseconds per jiffy (USEC_PER_SEC / HZ)
	sk      Sock
	ipv4    bool
	inKLane bool     // the iterator resolved lanes (LaneMap given)
	cong    [16]byte // Sock.Cong's buffer (congBuf)
}

// iterConfig is the iterator's part of cfg, and the converter for its
// records.
func iterConfig(cfg *Config) (tcpiter.Config, recConv, error) {
	hz := sched.ReadKernelRT().HZ
	if hz <= 0 {
		return tcpiter.Config{}, recConv{}, fmt.Errorf("tcp iterator: kernel tick rate unknown")
	}
	f := &cfg.Filter
	c := tcpiter.Config{States: cfg.States, LaneMap: cfg.LaneMap,
		LocalPort: f.LocalPort, RemotePort: f.RemotePort, Port: f.Port, CgroupID: f.CgroupID, Prefetch: cfg.prefetch}
	for _, l := range f.Lanes {
		c.Lanes |= 1 << uint(l)
	}
	return c, recConv{usPerJ: uint64(1_000_000 / hz), ipv4: cfg.IPv4Only, inKLane: cfg.LaneMap != nil}, nil
}

// openIter loads the iterator for a sampler; the error says why the
// sampler falls back to sock_diag.
func openIter(ns netns.NsHandle, cfg *Config) (*iterSource, error) {
	c, conv, err := iterConfig(cfg)
	if err != nil {
		return nil, err
	}
	it, err := tcpiter.Load(c)
	if err != nil {
		return nil, err
	}
	return &iterSource{it: it, ns: ns, recConv: conv}, nil
}

func (s *iterSource) Close() error { return s.it.Close() }

// dump walks the namespace's sockets and calls fn for each (fn must not
// keep the *Sock).
func (s *iterSource) dump(fn func(*Sock)) error {
	open := func() (rc readCloser, err error) { return s.it.Open() }
	var r readCloser
	var err error
	if s.ns.IsOpen() {
		r, err = inNetNS(s.ns, open)
	} else {
		r, err = open()
	}
	if err != nil {
		return err
	}
	defer r.Close()
	return s.rd.Each(r, func(x *tcpiter.Rec) {
		if s.ipv4 && x.Family != unix.AF_INET {
			return
		}
		fn(s.fill(x))
	})
}

type readCloser interface {
	Read([]byte) (int, error)
	Close() error
}

// fill turns a record into s.sk (returned): what inet_diag and
// tcp_get_info compute from the same fields.
func (s *recConv) fill(x *tcpiter.Rec) *Sock {
	sk := &s.sk
	*sk = Sock{Family: uint8(x.Family), State: x.State, Cookie: x.Cookie, UID: x.Uid, Inode: uint32(x.Ino),
		CgroupID: x.CgroupId, HasInfo: true, NSKMem: 9}
	if x.Family == unix.AF_INET6 {
		sk.Src = netip.AddrPortFrom(netip.AddrFrom16(x.Saddr).Unmap(), x.Sport)
		sk.Dst = netip.AddrPortFrom(netip.AddrFrom16(x.Daddr).Unmap(), x.Dport)
	} else {
		sk.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(x.Saddr[:4])), x.Sport)
		sk.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(x.Daddr[:4])), x.Dport)
	}
	if x.Kind == tcpiter.RecReq {
		// A request socket: sock_diag (inet_req_diag_fill) sends its
		// addresses and cookie only, no tcp_info, memory or owner.
		*sk = Sock{Family: sk.Family, State: x.State, Cookie: x.Cookie, Src: sk.Src, Dst: sk.Dst}
		if s.inKLane {
			sk.Lane, sk.HasLane = lane.Lane(x.Lane), true
		}
		return sk
	}
	// tcp_diag_get_info (not LISTEN).
	sk.RQueue = uint32(max(int32(x.RcvNxt-x.CopiedSeq), 0))
	sk.WQueue = x.WriteSeq - x.SndUna
	sk.SKMem[1], sk.SKMem[3], sk.SKMem[5], sk.SKMem[8] = x.Rcvbuf, x.Sndbuf, x.WmemQueued, x.Drops
	n := 0
	for n < len(x.Cong) && x.Cong[n] != 0 {
		n++
	}
	sk.Cong = s.congBuf(x.Cong[:n])
	if s.inKLane {
		sk.Lane, sk.HasLane = lane.Lane(x.Lane), true
	}
	sk.Info = s.info(x)
	return sk
}

// congBuf copies the name into the converter's own buffer (Sock.Cong
// aliases a buffer in both backends). Not s.sk.Cong's: fill has just
// zeroed s.sk, so that buffer was allocated anew for every record (16
// bytes, 100,000 allocations in a first sample of 100,000 sockets).
func (s *recConv) congBuf(c []int8) []byte {
	for i, v := range c[:min(len(c), len(s.cong))] {
		s.cong[i] = byte(v)
	}
	return s.cong[:min(len(c), len(s.cong))]
}

// info is tcp_get_info's arithmetic on the raw fields.
func (s *recConv) info(x *tcpiter.Rec) TCPInfo {
	ti := TCPInfo{
		State: x.State, CAState: CAState(x.CaState), Retransmits: x.Retransmits,
		RTO: uint32(uint64(x.RtoJiffies) * s.usPerJ), SndMSS: x.MssCache,
		Unacked: x.PacketsOut, Sacked: x.SackedOut, Lost: x.LostOut,
		RTT: x.SrttUs >> 3, RTTVar: x.MdevUs >> 2, SndSSThresh: x.SndSsthresh, SndCwnd: x.SndCwnd,
		TotalRetrans: x.TotalRetrans, PacingRate: x.PacingRate,
		BytesAcked: x.BytesAcked, BytesRecv: x.BytesReceived, BytesSent: x.BytesSent, BytesRetrans: x.BytesRetrans,
		NotsentBytes: uint32(max(int32(x.WriteSeq-x.SndNxt), 0)), MinRTT: x.MinRtt, SndWnd: x.SndWnd,
		RcvRTT:     x.RcvRttUs >> 3, // RcvWnd: not read (tcp_sock.rcv_wnd is outside the checked BTF), 0
		AppLimited: x.AppLimited != 0,
	}
	if x.RateDelivered != 0 && x.RateIntervalUs != 0 { // tcp_compute_delivery_rate
		ti.DeliveryRate = uint64(x.RateDelivered) * uint64(x.MssCache) * 1_000_000 / uint64(x.RateIntervalUs)
	}
	// tcp_get_info_chrono_stats: the running chrono counts up to now.
	var total uint64
	var st [3]uint64
	for i := range st {
		v := uint64(x.ChronoStat[i])
		if int(x.ChronoType) == i+1 {
			v += uint64(uint32(x.Jiffies) - x.ChronoStart)
		}
		st[i] = v * s.usPerJ
		total += st[i]
	}
	ti.BusyTime, ti.RwndLimited, ti.SndbufLimited = total, st[1], st[2]
	return ti
}
