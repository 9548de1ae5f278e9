// load.go: the two loads of docs/papers.md §004 — a CPU load (busy workers at
// normal priority) and an interrupt load (a peer flooding the tested host
// with UDP and ICMP).
//
// Interrupt-load topology, both namespaces created by this process and held
// only by file descriptors, so the kernel removes them (and the veth) when
// the process exits, even on SIGKILL:
//
//	tested host netns (H)                 peer netns (P)
//	measuring threads, UDP sink           flood sender (UDP + ICMP echo)
//	lnlh<pid> 10.251.<k>.1/30 <==veth==> lnlp<pid> 10.251.<k>.2/30
//
// Note: veth delivers in the sender's softirq (netif_rx on the sending CPU),
// so the receive work of H runs as softirq on whichever CPU the sender runs
// on — the local stand-in for the paper's NIC interrupts.
package latency

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// CPULoad is a set of busy-looping worker processes at normal priority.
type CPULoad struct {
	cmds []*exec.Cmd
}

// StartCPULoad starts n busy workers (separate processes: `sh` spinning on a
// builtin), each killed by `timeout` after limit even if lanes dies first.
func StartCPULoad(n int, limit time.Duration) (*CPULoad, error) {
	l := &CPULoad{}
	secs := strconv.Itoa(int(limit.Seconds()) + 1)
	for range n {
		cmd := exec.Command("timeout", "-s", "KILL", secs, "sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			l.Stop()
			return nil, fmt.Errorf("start cpu load worker: %w", err)
		}
		// Workers must run at normal priority whatever thread forked them.
		_ = SetThreadPolicy(cmd.Process.Pid, "other", 0)
		l.cmds = append(l.cmds, cmd)
	}
	return l, nil
}

// Stop kills the workers and waits for them.
func (l *CPULoad) Stop() {
	if l == nil {
		return
	}
	for _, c := range l.cmds {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
	}
	l.cmds = nil
}

// NetLoadConfig bounds the interrupt load.
type NetLoadConfig struct {
	Rate     int           // packets per second (UDP and ICMP alternate), default 20000
	Size     int           // UDP payload bytes, default 1000
	Duration time.Duration // hard limit: the sender stops after this
	// Exe, if set, is a lanes binary: the sender and the sink then run in a
	// child process (`lanes latency flood-child`), so that their goroutines
	// never share a Go runtime (scheduler locks, GC) with measuring threads.
	// Empty: they run in this process.
	Exe string
}

// NetLoad is a running flood between two private namespaces.
type NetLoad struct {
	Host, Peer         netns.NsHandle
	HostAddr, PeerAddr net.IP
	f                  *flooder  // in-process sender and sink
	child              *exec.Cmd // or a child process running them
	childOut           bytes.Buffer
	final              FloodCounts
}

// FloodCounts are a flood's packet counters.
type FloodCounts struct {
	Sent   uint64 `json:"sent"`   // packets the peer sent (UDP + ICMP)
	Recv   uint64 `json:"recv"`   // UDP datagrams the sink received
	Errors uint64 `json:"errors"` // failed sends
}

// flooder is the sender (peer side) and the sink (host side).
type flooder struct {
	sent, recv, errs atomic.Uint64
	stop             chan struct{}
	wg               sync.WaitGroup
	sink             *net.UDPConn
	udp              *net.UDPConn
	icmp             net.PacketConn
	hostAddr         net.IP
}

// StartNetLoad creates the namespaces and veth, and starts the flood.
func StartNetLoad(c NetLoadConfig) (nl *NetLoad, err error) {
	if c.Rate <= 0 {
		c.Rate = 20000
	}
	if c.Size <= 0 {
		c.Size = 1000
	}
	if c.Duration <= 0 {
		return nil, errors.New("net load needs a duration bound")
	}
	if c.Rate > 1_000_000 {
		return nil, fmt.Errorf("net load rate %d pps too high (max 1000000)", c.Rate)
	}
	k := 1 + os.Getpid()%250
	nl = &NetLoad{HostAddr: net.IPv4(10, 251, byte(k), 1).To4(), PeerAddr: net.IPv4(10, 251, byte(k), 2).To4(),
		Host: -1, Peer: -1}
	defer func() {
		if err != nil {
			nl.Close()
		}
	}()
	if nl.Host, err = newNS(); err != nil {
		return nil, err
	}
	if nl.Peer, err = newNS(); err != nil {
		return nil, err
	}
	if err := nl.wire(); err != nil {
		return nil, err
	}
	if c.Exe != "" {
		return nl, nl.startChild(c)
	}
	nl.f, err = startFlooder(nl.Host, nl.Peer, nl.HostAddr, nl.PeerAddr, c)
	return nl, err
}

// wire joins the two namespaces by a veth with a /30 between them, sets
// both ends and both loopbacks up, and enters static neighbours.
func (nl *NetLoad) wire() error {
	hname, pname := fmt.Sprintf("lnlh%d", os.Getpid()), fmt.Sprintf("lnlp%d", os.Getpid())
	hh, err := netlink.NewHandleAt(nl.Host, unix.NETLINK_ROUTE) // only rtnetlink: xfrm and nfnetlink may be modules not loaded
	if err != nil {
		return fmt.Errorf("netlink in host netns: %w", err)
	}
	defer hh.Close()
	ph, err := netlink.NewHandleAt(nl.Peer, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in peer netns: %w", err)
	}
	defer ph.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hname}, PeerName: pname, PeerNamespace: netlink.NsFd(int(nl.Peer))}
	if err := hh.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", hname, err)
	}
	for _, x := range []struct {
		h    *netlink.Handle
		name string
		ip   net.IP
	}{{hh, hname, nl.HostAddr}, {ph, pname, nl.PeerAddr}, {hh, "lo", nil}, {ph, "lo", nil}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			return fmt.Errorf("find %s: %w", x.name, err)
		}
		if x.ip != nil {
			if err := x.h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: x.ip, Mask: net.CIDRMask(30, 32)}}); err != nil {
				return fmt.Errorf("address %s on %s: %w", x.ip, x.name, err)
			}
		}
		if err := x.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", x.name, err)
		}
	}
	return nl.staticNeighbours(hh, ph, hname, pname)
}

// staticNeighbours enters each end's neighbour permanently: the flood must
// not depend on ARP, whose first resolution was sometimes lost under the
// burst queued behind it.
func (nl *NetLoad) staticNeighbours(hh, ph *netlink.Handle, hname, pname string) error {
	hl, err := hh.LinkByName(hname)
	if err != nil {
		return err
	}
	pl, err := ph.LinkByName(pname)
	if err != nil {
		return err
	}
	if err := hh.NeighSet(&netlink.Neigh{LinkIndex: hl.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: nl.PeerAddr, HardwareAddr: pl.Attrs().HardwareAddr}); err != nil {
		return fmt.Errorf("neighbour on %s: %w", hname, err)
	}
	if err := ph.NeighSet(&netlink.Neigh{LinkIndex: pl.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: nl.HostAddr, HardwareAddr: hl.Attrs().HardwareAddr}); err != nil {
		return fmt.Errorf("neighbour on %s: %w", pname, err)
	}
	return nil
}

// startFlooder opens the sockets (each in its namespace) and starts the
// sink and the sender.
func startFlooder(host, peer netns.NsHandle, hostAddr, peerAddr net.IP, c NetLoadConfig) (f *flooder, err error) {
	f = &flooder{stop: make(chan struct{}), hostAddr: hostAddr}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	// Sockets belong to the namespace they were created in.
	if err := inNS(host, func() (err error) {
		f.sink, err = net.ListenUDP("udp4", &net.UDPAddr{IP: hostAddr, Port: 9})
		return err
	}); err != nil {
		return nil, fmt.Errorf("udp sink: %w", err)
	}
	if err := inNS(peer, func() (err error) {
		if f.udp, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: hostAddr, Port: 9}); err != nil {
			return err
		}
		f.icmp, err = net.ListenPacket("ip4:icmp", peerAddr.String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("flood sockets: %w", err)
	}
	f.wg.Add(2)
	go f.drain()
	go f.flood(c)
	return f, nil
}

// startChild runs the sender and sink in `lanes latency flood-child`,
// passing the namespaces as fds 3 (host) and 4 (peer).
func (nl *NetLoad) startChild(c NetLoadConfig) error {
	var files []*os.File
	for _, h := range []netns.NsHandle{nl.Host, nl.Peer} {
		f, err := nsFile(h)
		if err != nil {
			return err
		}
		defer f.Close()
		files = append(files, f)
	}
	nl.child = exec.Command(c.Exe, "latency", "flood-child", "--rate", strconv.Itoa(c.Rate), "--size", strconv.Itoa(c.Size),
		"--duration", c.Duration.String(), "--host", nl.HostAddr.String(), "--peer", nl.PeerAddr.String())
	nl.child.ExtraFiles = files
	nl.child.Stdout = &nl.childOut
	nl.child.Stderr = os.Stderr
	// No Pdeathsig: it fires when the forking *thread* exits, and Go threads
	// do exit (locked ones). `--duration` bounds the child instead.
	if err := nl.child.Start(); err != nil {
		nl.child = nil
		return fmt.Errorf("start flood child: %w", err)
	}
	return nil
}

// FloodChild is the body of `lanes latency flood-child`: namespaces on fds
// 3 (host) and 4 (peer); it floods until the duration ends or SIGTERM, then
// prints its FloodCounts as JSON.
func FloodChild(rate, size int, d time.Duration, host, peer string, out io.Writer) error {
	hostIP, peerIP := net.ParseIP(host).To4(), net.ParseIP(peer).To4()
	if hostIP == nil || peerIP == nil {
		return fmt.Errorf("bad addresses %q %q", host, peer)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	f, err := startFlooder(netns.NsHandle(3), netns.NsHandle(4), hostIP, peerIP, NetLoadConfig{Rate: rate, Size: size, Duration: d})
	if err != nil {
		return err
	}
	select {
	case <-sig:
	case <-time.After(d):
	}
	f.close()
	return json.NewEncoder(out).Encode(f.counts())
}

// EnterHost moves the calling (locked) OS thread into the tested host's
// namespace; use it as latency.Config.Setup.
func (nl *NetLoad) EnterHost() error { return netns.Set(nl.Host) }

// Counts returns packets sent by the peer and received by the sink (for a
// child process: known once Close has run).
func (nl *NetLoad) Counts() (sent, recv uint64) {
	if nl.f != nil {
		c := nl.f.counts()
		return c.Sent, c.Recv
	}
	return nl.final.Sent, nl.final.Recv
}

func (f *flooder) counts() FloodCounts {
	return FloodCounts{Sent: f.sent.Load(), Recv: f.recv.Load(), Errors: f.errs.Load()}
}

func (f *flooder) drain() {
	defer f.wg.Done()
	buf := make([]byte, 2048)
	for {
		if _, err := f.sink.Read(buf); err != nil {
			return
		}
		f.recv.Add(1)
	}
}

// flood sends Rate packets per second in 1 ms batches until stopped or
// Duration has passed.
func (f *flooder) flood(c NetLoadConfig) {
	defer f.wg.Done()
	payload := make([]byte, c.Size)
	echo := make([]byte, 64)
	echo[0] = 8 // ICMP echo request
	binary.BigEndian.PutUint16(echo[4:], uint16(os.Getpid()))
	dst := &net.IPAddr{IP: f.hostAddr}
	deadline := time.Now().Add(c.Duration)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var seq uint16
	for {
		select {
		case <-f.stop:
			return
		case now := <-tick.C:
			if now.After(deadline) {
				return
			}
			// Catch up to the target count so timer slack does not lower the rate.
			want := uint64(now.Sub(start).Seconds() * float64(c.Rate))
			for n := 0; f.sent.Load() < want && n < c.Rate/100+1; n++ {
				var err error
				if seq%2 == 0 {
					_, err = f.udp.Write(payload)
				} else {
					binary.BigEndian.PutUint16(echo[6:], seq)
					echo[2], echo[3] = 0, 0
					binary.BigEndian.PutUint16(echo[2:], icmpChecksum(echo))
					_, err = f.icmp.WriteTo(echo, dst)
				}
				seq++
				// Count attempts, not successes, so a full queue cannot spin us.
				f.sent.Add(1)
				if err != nil {
					f.errs.Add(1)
				}
			}
		}
	}
}

// Close stops the flood and deletes the namespaces (and with them the veth).
func (nl *NetLoad) Close() error {
	if nl == nil {
		return nil
	}
	var err error
	if nl.f != nil {
		nl.f.close()
		nl.final = nl.f.counts()
		nl.f = nil
	}
	if nl.child != nil {
		_ = nl.child.Process.Signal(syscall.SIGTERM)
		werr := nl.child.Wait()
		if jerr := json.Unmarshal(nl.childOut.Bytes(), &nl.final); jerr != nil {
			err = fmt.Errorf("flood child: %w (%v)", jerr, werr)
		}
		nl.child = nil
	}
	if nl.Host >= 0 {
		nl.Host.Close()
		nl.Host = -1
	}
	if nl.Peer >= 0 {
		nl.Peer.Close()
		nl.Peer = -1
	}
	return err
}

func (f *flooder) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	if f.sink != nil {
		f.sink.Close()
	}
	if f.udp != nil {
		f.udp.Close()
	}
	if f.icmp != nil {
		f.icmp.Close()
	}
	f.wg.Wait()
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// newNS creates an anonymous network namespace and returns a handle to it,
// leaving the calling thread where it was.
func newNS() (netns.NsHandle, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return -1, fmt.Errorf("get netns: %w", err)
	}
	defer orig.Close()
	h, err := netns.New()
	if err != nil {
		return -1, fmt.Errorf("new netns: %w", err)
	}
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in the new namespace: do not return it to the pool.
		runtime.LockOSThread()
		return -1, fmt.Errorf("return to netns: %w", err)
	}
	return h, nil
}

// inNS runs fn on a thread switched into ns.
func inNS(ns netns.NsHandle, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		runtime.LockOSThread() // never give a thread in the wrong netns back
		return errors.Join(ferr, err)
	}
	return ferr
}

// nsFile returns an *os.File for a namespace handle (for children via
// ExtraFiles); the caller closes it.
func nsFile(h netns.NsHandle) (*os.File, error) {
	fd, err := unix.Dup(int(h))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "netns"), nil
}
