// bed.go: the experiment's bed: a sending and a receiving namespace joined
// by a veth (dl0, dl1) whose sending side is the emulated NIC of rate R,
// its egress qdisc (the lanes datapath, or HTB with one pfifo), the
// realtime lane opened on it, the bulk TCP and UDP load, and the receiver
// that timestamps each datagram (SO_TIMESTAMPNS).
package deadline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/schedtick"
)

// dlBed is the two namespaces and their link.
type dlBed struct {
	t        *topo.Topology
	snd, rcv *topo.Node
	dst      netip.Addr
	rate     uint64
}

const (
	dlDevS = "dl0"
	dlDevR = "dl1"
)

func newDLBed(rate uint64) (_ *dlBed, err error) {
	t, err := topo.New()
	if err != nil {
		return nil, err
	}
	b := &dlBed{t: t, rate: rate}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if b.snd, err = t.AddNode("snd", ""); err != nil {
		return nil, err
	}
	if b.rcv, err = t.AddNode("rcv", ""); err != nil {
		return nil, err
	}
	b.dst = b.rcv.Addr
	addr := func(a netip.Addr) *netlink.Addr {
		return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(24, 32)}}
	}
	if err := b.snd.Do(func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: dlDevS}, PeerName: dlDevR, PeerNamespace: netlink.NsFd(int(b.rcv.Handle))}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("veth: %w", err)
		}
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, addr(b.snd.Addr)); err != nil {
			return err
		}
		// One segment per skb: a frame is the non-preemptible unit.
		if err := netlink.LinkSetGSOMaxSegs(l, 1); err != nil {
			return fmt.Errorf("gso_max_segs: %w", err)
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		return nil, err
	}
	if err := b.rcv.Do(func() error {
		l, err := netlink.LinkByName(dlDevR)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, addr(b.rcv.Addr)); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// installFIFO puts the default-Linux stand-in on dl0: HTB at 0.95 R, one
// class, pfifo of limit packets.
func (b *dlBed) installFIFO(limit int) error {
	return b.snd.Do(func() error {
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		rate := b.rate * 95 / 100 / 8
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
		q.Defcls = 1
		if err := netlink.QdiscReplace(q); err != nil {
			return fmt.Errorf("htb: %w", err)
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.MakeHandle(1, 0), Handle: netlink.MakeHandle(1, 1)},
			netlink.HtbClassAttrs{Rate: rate * 8, Ceil: rate * 8, Buffer: uint32(max(rate/1000, 1600)), Cbuffer: uint32(max(rate/1000, 1600))})
		if err := netlink.ClassReplace(c); err != nil {
			return fmt.Errorf("htb class: %w", err)
		}
		// netlink has no pfifo options: the leaf with tc.
		if out, err := b.snd.Run("tc", "qdisc", "replace", "dev", dlDevS, "parent", "1:1", "handle", "10:", "pfifo", "limit", fmt.Sprint(limit)); err != nil {
			return fmt.Errorf("pfifo: %v: %s", err, out)
		}
		return nil
	})
}

func (b *dlBed) removeRoot() {
	_ = b.snd.Do(func() error {
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		return netlink.QdiscDel(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)}, QdiscType: "htb"})
	})
}

// openLanes installs the lanes datapath (shaped at R) and starts a
// realtime lane whose trace fills rec; tune adjusts its configuration.
func (b *dlBed) openLanes(ctx context.Context, sock string, trace func(rtlane.Event), tune func(*config.Realtime)) (func(), *rtlane.Lane, error) {
	var dp *datapath.Datapath
	if err := b.snd.Do(func() (err error) {
		dp, err = datapath.Open(datapath.Config{Interface: dlDevS, Mode: datapath.Shaped, UplinkBps: b.rate,
			Instance: "lab-dl-" + b.t.ID})
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("lanes datapath: %w", err)
	}
	cfg := config.DefaultRealtime()
	cfg.Enabled = true
	cfg.Socket = sock
	cfg.Rate = config.Rate(b.rate * 95 / 100)
	if tune != nil {
		tune(&cfg)
	}
	var l *rtlane.Lane
	if err := b.snd.Do(func() (err error) {
		l, err = rtlane.New(cfg, rtlane.WithTrace(trace), rtlane.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		return err
	}); err != nil {
		dp.Close()
		return nil, nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(lctx); close(done) }()
	return func() { cancel(); <-done; l.Close(); dp.Close() }, l, nil
}

// dlBulkCC is the bulk TCP senders' congestion control, set on each socket.
const dlBulkCC = "cubic"

// startBulk runs n TCP connections snd -> rcv until stop is called.
func (b *dlBed) startBulk(n int) (stop func(), err error) {
	var ln net.Listener
	if err := b.rcv.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(b.dst, 0).String())
		return err
	}); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		var c net.Conn
		if err := b.snd.Do(func() (err error) {
			// CUBIC on the socket itself: the namespace's default may be
			// only what the machine allows (BBR here), and BBR's own pacing
			// and ProbeRTT would change the experiment
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { return testbed.SetCC(rc, dlBulkCC) }}
			c, err = d.Dial("tcp4", ln.Addr().String())
			return err
		}); err != nil {
			close(done)
			ln.Close()
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}

// startUDPBulk runs n unresponsive UDP senders snd -> rcv, each writing
// 1,400 B datagrams as fast as its socket buffer lets it (the qdisc keeps
// the socket's bytes charged until they leave, so the queue stays full
// without spinning), until stop is called.
func (b *dlBed) startUDPBulk(n int) (stop func(), err error) {
	var sink *net.UDPConn
	if err := b.rcv.Do(func() (err error) {
		sink, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.dst, 0)))
		return err
	}); err != nil {
		return nil, err
	}
	go io.Copy(io.Discard, sink)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var conns []*net.UDPConn
	for i := 0; i < n; i++ {
		var c *net.UDPConn
		if err := b.snd.Do(func() (err error) {
			c, err = net.DialUDP("udp4", nil, sink.LocalAddr().(*net.UDPAddr))
			return err
		}); err != nil {
			close(done)
			sink.Close()
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1400)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil && errors.Is(err, net.ErrClosed) {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
		sink.Close()
	}, nil
}

// receiver collects arrivals in rcv until stop.
type dlReceiver struct {
	rx   *rtlane.Receiver
	mu   sync.Mutex
	got  map[[2]uint32][2]int64 // (flow, seq) -> {kernel, user}
	from map[netip.AddrPort]int // datagrams per source address
	done chan struct{}
	quit chan struct{}
}

func (b *dlBed) startReceiver(prio int) (*dlReceiver, error) {
	r := &dlReceiver{got: map[[2]uint32][2]int64{}, from: map[netip.AddrPort]int{}, done: make(chan struct{}), quit: make(chan struct{})}
	if err := b.rcv.Do(func() (err error) {
		r.rx, err = rtlane.ListenReceiver(netip.AddrPortFrom(b.dst, 0))
		return err
	}); err != nil {
		return nil, err
	}
	r.rx.SetTimeout(100 * time.Millisecond)
	go func() {
		defer close(r.done)
		setFIFO(prio)
		var ticked int64
		for {
			// The receiver stands for another host, yet it is a locked
			// goroutine of the lab's process: keep its schedtick fresh
			// (tick.go, a yield every 4 ms at most).
			ticked = schedtick.Fresh(ticked)
			a, err := r.rx.Read()
			if err != nil {
				// EAGAIN: timeout; EINTR: a signal (Go's preemption) ends a
				// read on a socket with SO_RCVTIMEO even with SA_RESTART.
				if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
					select {
					case <-r.quit:
						return
					default:
					}
					continue
				}
				return
			}
			if len(a.Payload) < 8 {
				continue
			}
			k := [2]uint32{binary.BigEndian.Uint32(a.Payload), binary.BigEndian.Uint32(a.Payload[4:])}
			r.mu.Lock()
			r.got[k] = [2]int64{a.Kernel, a.User}
			r.from[a.From]++
			r.mu.Unlock()
		}
	}()
	return r, nil
}

func (r *dlReceiver) stop() map[[2]uint32][2]int64 {
	time.Sleep(200 * time.Millisecond)
	close(r.quit)
	<-r.done
	r.rx.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}
