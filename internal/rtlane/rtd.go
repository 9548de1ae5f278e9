// rtd.go: the realtime data path in a process of its own, lanes-rtd (C,
// rtd/ in the source tree; docs/realtime.md "The data path process"):
// finding it, starting it with the lane's sockets, its priority, handing
// it granted connections and stopping it. What the two processes say to
// each other is rtdctl.go.
//
// The lane keeps what needs the daemon: the listening socket, credentials,
// grants and the connection limits, ungranted clients, the destinations'
// egress class (netlink), the counters' JSON, the PM QoS request and the
// priority it follows. Each granted connection is handed to lanes-rtd
// (rtdConn, SCM_RIGHTS), which from then on reads its requests, admits,
// queues, releases and sends, and replies, on one SCHED_FIFO thread
// blocked in epoll_wait: no Go scheduler, P, sysmon or collector between a
// request and its datagram.
//
// lanes-rtd is found beside the running executable, or in
// ../libexec/lanes/ from it (make build, make install, the .deb); without
// it the realtime lane cannot run (ErrNoHelper), and the daemon says so in
// its status while the rest of lanes runs.
package rtlane

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
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

// rtdStart is what lanes-rtd is started with: the lane's senders, its
// configuration and the route guess, the priority and whether a trace
// pipe is wanted.
type rtdStart struct {
	path   string
	tx     [2][2]int // the lane's UDP senders (Lane.tx)
	trace  bool
	config rtdConfigMsg
	route  bool // the default route's destinations leave through the lanes tree
	prio   int  // SCHED_FIFO priority (0: normal)
	log    *slog.Logger
}

// startRTD starts lanes-rtd as sp says and configures it.
func startRTD(sp rtdStart) (*rtdProc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("realtime: control socket: %w", err)
	}
	p := &rtdProc{ctl: fds[0], exit: make(chan error, 1), answers: make(chan []byte, 64), synced: make(chan uint32, 1)}
	files, err := p.files(fds[1], sp.tx, sp.trace)
	defer closeFiles(files) // the child holds its own copies
	if err != nil {
		p.close()
		return nil, err
	}
	p.cmd = exec.Command(sp.path)
	p.cmd.ExtraFiles = files
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		p.close()
		return nil, fmt.Errorf("realtime: start %s: %w", sp.path, err)
	}
	go func() { p.exit <- p.cmd.Wait() }()
	if err := p.configure(&sp.config, sp.route); err != nil {
		p.stop()
		p.close()
		return nil, err
	}
	if sp.prio > 0 {
		if err := setThreadFIFO(p.cmd.Process.Pid, sp.prio); err != nil {
			sp.log.Warn("realtime: lanes-rtd stays at normal priority", "priority", sp.prio, "err", err)
		}
	}
	return p, nil
}

// files are the descriptors lanes-rtd starts with (rtd/ctl.h,
// RTD_FD_*): its end of the control socket ctl, the senders tx and, with
// a trace, the write end of the trace pipe, whose read end goes to p.
func (p *rtdProc) files(ctl int, tx [2][2]int, trace bool) ([]*os.File, error) {
	files := []*os.File{os.NewFile(uintptr(ctl), "lanes-rtd control")}
	for fam := range tx {
		for kind := range tx[fam] {
			files = append(files, dupFile(tx[fam][kind]))
		}
	}
	if trace {
		r, w, err := os.Pipe()
		if err != nil {
			return files, err
		}
		_ = unix.SetNonblock(int(w.Fd()), true)
		p.trace = r
		files = append(files, w)
	}
	return files, nil
}

// closeFiles closes the lane's copies of what lanes-rtd was started with.
func closeFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
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

// configure sends the configuration and the route guess and waits for
// lanes-rtd to say it is ready.
func (p *rtdProc) configure(cfg *rtdConfigMsg, route bool) error {
	if err := p.send(cfg, -1); err != nil {
		return fmt.Errorf("realtime: configure lanes-rtd: %w", err)
	}
	if err := p.sendRoute(netip.Addr{}, route); err != nil {
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

// helperClosed untracks a connection lanes-rtd has closed.
func (l *Lane) helperClosed(id uint32) {
	l.clients.mu.Lock()
	c := l.clients.handed[id]
	delete(l.clients.handed, id)
	l.clients.mu.Unlock()
	if c != nil {
		l.clients.untrack(c)
	}
}

// handOver gives a granted connection to p (lanes-rtd) and closes the
// lane's descriptor; on an error the caller serves it.
func (t *connTable) handOver(p *rtdProc, c *conn) error {
	t.mu.Lock()
	t.nextConn++
	id := t.nextConn
	t.handed[id] = c
	t.mu.Unlock()
	if err := p.send(&rtdConnMsg{H: rtdHdr{Type: rtdConn, Conn: id}, UID: c.uid}, c.fd); err != nil {
		t.mu.Lock()
		delete(t.handed, id)
		t.mu.Unlock()
		return err
	}
	unix.Close(c.fd)
	c.fd = -1
	return nil
}

// helperPriority is lanes-rtd's priority as the lane last set it.
type helperPriority struct {
	rule priorityRule
	at   int
	log  *slog.Logger
}

// follow moves lanes-rtd (pid) to the priority its clients need: the
// highest any granted client's reader would have in this process. It also
// puts it back there when anyone else changed it (sched_getattr, once a
// period): root may move lanes-rtd, and a move to background made it
// SCHED_OTHER nice 19 for good.
func (h *helperPriority) follow(pid int, clients *connTable) {
	clients.mu.Lock()
	want := h.rule.release
	for _, c := range clients.handed {
		if h.rule.follows(c) {
			want = max(want, h.rule.readerPriority(clientPriority(c.pid)))
		}
	}
	clients.mu.Unlock()
	if a, err := unix.SchedGetAttr(pid, 0); err == nil && a.Policy == unix.SCHED_FIFO && int(a.Priority) == want {
		h.at = want
		return
	}
	if err := setThreadFIFO(pid, want); err != nil {
		h.log.Debug("realtime: lanes-rtd priority not moved", "priority", want, "err", err)
		return
	}
	if want == h.at {
		h.log.Warn("realtime: lanes-rtd's scheduling was changed from outside; restored", "priority", want)
	}
	h.at = want
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
