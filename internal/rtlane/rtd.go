// rtd.go: the realtime data path in a process of its own, lanes-rtd (C,
// rtd/ in the source tree; docs/realtime.md "The data path process").
//
// The lane keeps what needs the daemon: the listening socket, credentials,
// grants and the connection limits, ungranted clients, the destinations'
// egress class (netlink), the counters' JSON, the PM QoS request and the
// priority it follows. Each granted connection is handed to lanes-rtd
// (rtdConn, SCM_RIGHTS), which from then on reads its requests, admits,
// queues, releases and sends, and replies, on one SCHED_FIFO thread
// blocked in epoll_wait: no Go scheduler, P, sysmon or collector between a
// request and its datagram. The control protocol is rtd/ctl.h; the Go
// structs below mirror it (rtd_test.go checks the layout with the C
// compiler).
//
// lanes-rtd is found beside the running executable, or in
// ../libexec/lanes/ from it (make build, make install, the .deb); without
// it the realtime lane cannot run (ErrNoHelper), and the daemon says so in
// its status while the rest of lanes runs.
package rtlane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// HelperName is the data path process's file name.
const HelperName = "lanes-rtd"

// FindHelper returns the lanes-rtd that belongs to the running executable:
// beside it, or in ../libexec/lanes/ from its folder; "" if there is none.
func FindHelper() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Dir(exe)
	for _, p := range []string{filepath.Join(dir, HelperName), filepath.Join(dir, "..", "libexec", "lanes", HelperName)} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// Control message types and flags (rtd/ctl.h).
const (
	rtdConfig      = 1
	rtdConn        = 2
	rtdRoute       = 3
	rtdCountersAsk = 4
	rtdReply       = 5
	rtdTraceSync   = 6
	rtdReady       = 0x81
	rtdLookup      = 0x82
	rtdForward     = 0x83
	rtdClosed      = 0x84
	rtdCounters    = 0x85
	rtdForget      = 0x86

	rtdEnabled  = 0x1
	rtdAttachOK = 0x2

	rtdReasons = 32
)

type rtdHdr struct{ Type, Conn uint32 }

type rtdConfigMsg struct {
	H                                rtdHdr
	RateBps, NetnsCookie             uint64
	Overhead, Backlog, Reserve, MaxQ uint32
	Flags, ClassPrio, PlainPrio      uint32
	QueueBytes, Requests, Pad        uint32
}

type rtdConnMsg struct {
	H        rtdHdr
	UID, Pad uint32
}

type rtdRouteMsg struct {
	H      rtdHdr
	Family uint8
	Class  uint8
	Pad    [6]uint8
	Addr   [16]byte
}

type rtdForwardMsg struct {
	H        rtdHdr
	UID, Len uint32
}

type rtdFlow struct {
	UID, Flow                                                    uint32
	Admitted, Rejected, Sent, SentBytes, DroppedLate, SendErrors uint64
	MinMarginNs                                                  int64
	Rejects                                                      [rtdReasons]uint64
}

type rtdCountersMsg struct {
	H                   rtdHdr
	NFlows, More        uint32
	Depth, Conns        uint32
	QueuedNs            int64
	RateBps             uint64
	AppSocks            int64
	LostNotices, LostEv uint64
	Allocs              uint64
	PoolBytes, PoolFree uint64
	SendFull            uint64
	Totals              rtdFlow
}

type rtdEvent struct {
	Kind, Reason   uint8
	Pad            uint16
	UID, Flow, Seq uint32
	Time, Deadline int64
	Tx             int64
}

// rtdProc is a running lanes-rtd.
type rtdProc struct {
	cmd   *exec.Cmd
	ctl   int        // the daemon's end of the control socket
	wmu   sync.Mutex // one writer at a time
	trace *os.File   // read end of the trace pipe, nil without a trace
	exit  chan error // the process's end

	askMu   sync.Mutex // one counters request at a time
	askID   uint32
	answers chan []byte // RTD_COUNTERS messages

	syncMu sync.Mutex // one trace sync at a time
	syncID uint32
	synced chan uint32 // the trace reader saw the sync event of this id
}

func (p *rtdProc) send(msg any, fd int) error {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.NativeEndian, msg)
	return p.sendRaw(b.Bytes(), fd)
}

func (p *rtdProc) sendRaw(b []byte, fd int) error {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for {
		err := unix.Sendmsg(p.ctl, b, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// startHelper starts lanes-rtd with the lane's sockets and configures it.
func (l *Lane) startHelper() (*rtdProc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("realtime: control socket: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "lanes-rtd control")
	defer child.Close()
	p := &rtdProc{ctl: fds[0], exit: make(chan error, 1), answers: make(chan []byte, 64), synced: make(chan uint32, 1)}
	files := []*os.File{child}
	for fam := range l.tx {
		for kind := range l.tx[fam] {
			files = append(files, dupFile(l.tx[fam][kind]))
		}
	}
	var traceW *os.File
	if l.trace != nil {
		r, w, err := os.Pipe()
		if err != nil {
			unix.Close(p.ctl)
			return nil, err
		}
		_ = unix.SetNonblock(int(w.Fd()), true)
		p.trace, traceW = r, w
		files = append(files, w)
	}
	defer func() {
		for _, f := range files[1:] {
			if f != nil {
				f.Close()
			}
		}
	}()
	p.cmd = exec.Command(l.helper)
	p.cmd.ExtraFiles = files
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		unix.Close(p.ctl)
		if p.trace != nil {
			p.trace.Close()
		}
		return nil, fmt.Errorf("realtime: start %s: %w", l.helper, err)
	}
	_ = traceW // closed with files: the child holds the write end
	go func() { p.exit <- p.cmd.Wait() }()
	if err := l.configureHelper(p); err != nil {
		p.stop()
		p.close()
		return nil, err
	}
	if prio := l.cfg.ReleasePriority; prio > 0 {
		if err := setThreadFIFO(p.cmd.Process.Pid, prio); err != nil {
			l.log.Warn("realtime: lanes-rtd stays at normal priority", "priority", prio, "err", err)
		}
	}
	return p, nil
}

// dupFile is a File of a duplicate of fd (nil for -1), for ExtraFiles.
func dupFile(fd int) *os.File {
	if fd < 0 {
		return nil
	}
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(d), "realtime sender")
}

// configureHelper sends the configuration and the route guess and waits
// for lanes-rtd to say it is ready.
func (l *Lane) configureHelper(p *rtdProc) error {
	if err := l.sendConfig(p); err != nil {
		return fmt.Errorf("realtime: configure lanes-rtd: %w", err)
	}
	if err := l.sendRoute(p, netip.Addr{}, (*l.routes.Load())[netip.Addr{}]); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	_ = unix.SetsockoptTimeval(p.ctl, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	defer func() {
		tv := unix.Timeval{}
		_ = unix.SetsockoptTimeval(p.ctl, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}()
	var b [8]byte
	n, err := unix.Read(p.ctl, b[:])
	if err != nil || n < 8 || binary.NativeEndian.Uint32(b[:]) != rtdReady {
		return fmt.Errorf("realtime: lanes-rtd did not become ready (read %d bytes: %v)", n, err)
	}
	return nil
}

func (l *Lane) sendConfig(p *rtdProc) error {
	m := rtdConfigMsg{H: rtdHdr{Type: rtdConfig}, RateBps: l.rate.Load(), NetnsCookie: l.netns,
		Overhead: uint32(l.cfg.Overhead), Backlog: uint32(l.cfg.Backlog), Reserve: uint32(l.cfg.Reserve),
		MaxQ: uint32(l.cfg.MaxQueue), ClassPrio: lane.Realtime.ClassID(), PlainPrio: 6,
		QueueBytes: uint32(l.cfg.MaxQueueBytes), Requests: uint32(l.cfg.ClientRequests)}
	if l.cfg.Enabled {
		m.Flags |= rtdEnabled
	}
	if l.attachOK {
		m.Flags |= rtdAttachOK
	}
	return p.send(&m, -1)
}

func (l *Lane) sendRoute(p *rtdProc, a netip.Addr, class bool) error {
	m := rtdRouteMsg{H: rtdHdr{Type: rtdRoute}}
	switch {
	case a.Is4():
		m.Family = 4
		a4 := a.As4()
		copy(m.Addr[:], a4[:])
	case a.Is6():
		m.Family = 6
		m.Addr = a.As16()
	}
	if class {
		m.Class = 1
	}
	return p.send(&m, -1)
}

// serveHelper reads lanes-rtd's messages until the control socket ends;
// it returns why.
func (l *Lane) serveHelper(p *rtdProc) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(p.ctl, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("realtime: lanes-rtd control: %w", err)
		case n == 0:
			return errors.New("realtime: lanes-rtd closed its control socket")
		case n < 8:
			return fmt.Errorf("realtime: lanes-rtd sent %d bytes", n)
		}
		msg := append([]byte(nil), buf[:n]...)
		l.helperMessage(p, msg)
	}
}

// helperMessage acts on one message of lanes-rtd.
func (l *Lane) helperMessage(p *rtdProc, msg []byte) {
	var h rtdHdr
	_, _ = binary.Decode(msg, binary.NativeEndian, &h)
	switch h.Type {
	case rtdLookup:
		var r rtdRouteMsg
		if _, err := binary.Decode(msg, binary.NativeEndian, &r); err == nil {
			// The refresher busy: dropped; lanes-rtd asks again at a
			// later datagram (route.c, ROUTE_ASK_NS). Never answered
			// from here: this goroutine must not write to the control
			// socket while lanes-rtd may be blocked writing to it.
			select {
			case l.lookups <- routeAddr(r):
			default:
			}
		}
	case rtdForward:
		go l.answerForward(p, h.Conn, msg)
	case rtdClosed:
		l.helperClosed(h.Conn)
	case rtdForget:
		var r rtdRouteMsg
		if _, err := binary.Decode(msg, binary.NativeEndian, &r); err == nil {
			l.forgetRoute(routeAddr(r))
		}
	case rtdCounters:
		select {
		case p.answers <- msg:
		default:
		}
	}
}

func routeAddr(r rtdRouteMsg) netip.Addr {
	if r.Family == 4 {
		return netip.AddrFrom4([4]byte(r.Addr[:4]))
	}
	return netip.AddrFrom16(r.Addr)
}

// answerForward answers a client's STATS request lanes-rtd handed over.
func (l *Lane) answerForward(p *rtdProc, id uint32, msg []byte) {
	var f rtdForwardMsg
	_, _ = binary.Decode(msg, binary.NativeEndian, &f)
	req, _ := wire.ParseRequest(msg[binary.Size(f):])
	rep := wire.Reply{Type: wire.TypeStatsOK, Flow: req.Flow, Seq: req.Seq, Body: l.statsBody(f.UID),
		Time: uint64(monoclock.Now())}
	out := binary.NativeEndian.AppendUint32(nil, rtdReply)
	out = binary.NativeEndian.AppendUint32(out, id)
	out = wire.AppendReply(out, &rep)
	_ = p.sendRaw(out, -1)
}

// helperClosed untracks a connection lanes-rtd has closed.
func (l *Lane) helperClosed(id uint32) {
	l.connMu.Lock()
	c := l.handed[id]
	delete(l.handed, id)
	l.connMu.Unlock()
	if c != nil {
		l.untrack(c)
	}
}

// handOver gives a granted connection to lanes-rtd and closes the lane's
// descriptor; false if that failed (the caller serves it).
func (l *Lane) handOver(c *conn) bool {
	p := l.rtd
	l.connMu.Lock()
	l.nextConn++
	id := l.nextConn
	l.handed[id] = c
	l.connMu.Unlock()
	if err := p.send(&rtdConnMsg{H: rtdHdr{Type: rtdConn, Conn: id}, UID: c.uid}, c.fd); err != nil {
		l.connMu.Lock()
		delete(l.handed, id)
		l.connMu.Unlock()
		l.log.Warn("realtime: lanes-rtd did not take a client", "err", err)
		return false
	}
	unix.Close(c.fd)
	c.fd = -1
	return true
}

// helperStats asks lanes-rtd for its counters.
func (l *Lane) helperStats(p *rtdProc) (Snapshot, error) {
	p.askMu.Lock()
	defer p.askMu.Unlock()
	p.askID++
	id := p.askID
	if err := p.send(&rtdHdr{Type: rtdCountersAsk, Conn: id}, -1); err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Flows: []FlowStats{}}
	timeout := time.After(2 * time.Second)
	for {
		var msg []byte
		select {
		case msg = <-p.answers:
		case err := <-p.exit:
			p.exit <- err
			return s, errors.New("realtime: lanes-rtd has exited")
		case <-timeout:
			return s, errors.New("realtime: lanes-rtd did not answer for its counters")
		}
		var m rtdCountersMsg
		off, err := binary.Decode(msg, binary.NativeEndian, &m)
		if err != nil || m.H.Conn != id {
			continue
		}
		s.RateBps, s.Depth, s.BacklogNs = m.RateBps, int(m.Depth), m.QueuedNs
		s.Totals = m.Totals.counters()
		s.AppSocks = m.AppSocks
		s.Helper = &HelperStats{PoolBytes: m.PoolBytes, PoolFree: m.PoolFree, Allocs: m.Allocs, SendFull: m.SendFull}
		for i := 0; i < int(m.NFlows); i++ {
			var f rtdFlow
			k, err := binary.Decode(msg[off:], binary.NativeEndian, &f)
			if err != nil {
				break
			}
			off += k
			s.Flows = append(s.Flows, f.stats())
		}
		if m.More == 0 {
			return s, nil
		}
	}
}

func (f *rtdFlow) counters() Counters {
	return Counters{Admitted: f.Admitted, Rejected: f.Rejected, Sent: f.Sent, SentBytes: f.SentBytes,
		DroppedLate: f.DroppedLate, SendErrors: f.SendErrors, MinMarginNs: f.MinMarginNs}
}

func (f *rtdFlow) stats() FlowStats {
	s := FlowStats{UID: f.UID, Flow: f.Flow, Counters: f.counters()}
	for r, n := range f.Rejects {
		if n > 0 {
			if s.Rejects == nil {
				s.Rejects = map[string]uint64{}
			}
			s.Rejects[wire.ReasonString(uint8(r))] = n
		}
	}
	return s
}

// readTrace turns lanes-rtd's trace events into the lane's trace calls.
func (l *Lane) readTrace(p *rtdProc) {
	buf := make([]byte, 40*256)
	var carry []byte
	for {
		n, err := p.trace.Read(buf)
		if n > 0 {
			carry = append(carry, buf[:n]...)
			for len(carry) >= 40 {
				var e rtdEvent
				_, _ = binary.Decode(carry[:40], binary.NativeEndian, &e)
				carry = carry[40:]
				if e.Kind == 0 { // a sync event (SyncTrace)
					select {
					case p.synced <- e.Seq:
					default:
					}
					continue
				}
				l.trace(Event{Kind: EventKind(e.Kind), Time: e.Time, UID: e.UID, Flow: e.Flow, Seq: e.Seq,
					Deadline: e.Deadline, Tx: e.Tx, Reason: e.Reason})
			}
			carry = append([]byte(nil), carry...)
		}
		if err != nil {
			return
		}
	}
}

// SyncTrace returns once every trace event of what the lane has done so
// far has been passed to the trace function (lanes-rtd's events arrive
// through a pipe; in-process they are synchronous), or after a second.
func (l *Lane) SyncTrace() {
	p := l.rtd
	if p == nil || p.trace == nil {
		return
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.syncID++
	if p.send(&rtdHdr{Type: rtdTraceSync, Conn: p.syncID}, -1) != nil {
		return
	}
	timeout := time.After(time.Second)
	for {
		select {
		case id := <-p.synced:
			if id == p.syncID {
				return
			}
		case <-timeout:
			return
		}
	}
}

// followHelper moves lanes-rtd to the priority its clients need: the
// highest any granted client's reader would have in this process.
func (l *Lane) followHelper() {
	l.connMu.Lock()
	want := l.cfg.ReleasePriority
	for _, c := range l.handed {
		if l.follows(c) {
			want = max(want, l.readerPriority(clientPriority(c.pid)))
		}
	}
	l.connMu.Unlock()
	if want == l.helperPrio {
		return
	}
	if err := setThreadFIFO(l.rtd.cmd.Process.Pid, want); err != nil {
		l.log.Debug("realtime: lanes-rtd priority not moved", "priority", want, "err", err)
		return
	}
	l.helperPrio = want
}

// stop closes the control socket (lanes-rtd drops what is queued, with a
// shutdown notice, and exits) and waits for the process, killing it after
// a second.
func (p *rtdProc) stop() error {
	p.wmu.Lock()
	_ = unix.Shutdown(p.ctl, unix.SHUT_RDWR)
	p.wmu.Unlock()
	var err error
	select {
	case err = <-p.exit:
	case <-time.After(time.Second):
		_ = p.cmd.Process.Kill()
		err = <-p.exit
	}
	p.exit <- err
	return err
}

// close releases the lane's ends once nothing reads them any more.
func (p *rtdProc) close() {
	unix.Close(p.ctl)
	if p.trace != nil {
		p.trace.Close()
	}
}

// merge adds lanes-rtd's counters h to s, this process's: the queue and
// the attached sockets are lanes-rtd's alone, the counters the sum of
// both, flow by flow.
func (s *Snapshot) merge(h Snapshot) {
	s.RateBps, s.Depth, s.BacklogNs, s.AppSocks, s.Helper = h.RateBps, h.Depth, h.BacklogNs, h.AppSocks, h.Helper
	s.Totals.add(h.Totals)
	at := map[flowKey]int{}
	for i, f := range s.Flows {
		at[flowKey{f.UID, f.Flow}] = i
	}
	for _, f := range h.Flows {
		i, ok := at[flowKey{f.UID, f.Flow}]
		if !ok {
			s.Flows = append(s.Flows, f)
			continue
		}
		g := &s.Flows[i]
		g.Counters.add(f.Counters)
		for k, v := range f.Rejects {
			if g.Rejects == nil {
				g.Rejects = map[string]uint64{}
			}
			g.Rejects[k] += v
		}
	}
	sortFlows(s.Flows)
}

func (c *Counters) add(o Counters) {
	c.Admitted += o.Admitted
	c.Rejected += o.Rejected
	c.Sent += o.Sent
	c.SentBytes += o.SentBytes
	c.DroppedLate += o.DroppedLate
	c.SendErrors += o.SendErrors
	c.MinMarginNs = min(c.MinMarginNs, o.MinMarginNs)
}

// attachProbe says whether this kernel takes an SO_PRIORITY control
// message on a UDP send (6.14+; before, sendmsg fails with EINVAL), which
// lanes-rtd gives each datagram it sends from a client's own socket, and
// returns the namespace's cookie (SO_NETNS_COOKIE, 5.14+) such a socket
// must have; ok false if either is missing. fd is one of the lane's IPv4
// senders. MSG_PROBE: the kernel parses and routes the datagram and sends
// nothing.
func attachProbe(fd int) (cookie uint64, ok bool) {
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, false
	}
	oob := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SO_PRIORITY
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(oob[unix.CmsgLen(0):], 6)
	err = unix.Sendmsg(fd, nil, oob, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}, msgProbe)
	return cookie, err != unix.EINVAL
}

// msgProbe is MSG_PROBE (linux/socket.h): do not send, only probe the path.
const msgProbe = 0x10
