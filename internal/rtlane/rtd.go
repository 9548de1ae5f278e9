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

// startHelper starts lanes-rtd with the lane's sockets and configures it.
func (l *Lane) startHelper() (*rtdProc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("realtime: control socket: %w", err)
	}
	p := &rtdProc{ctl: fds[0], exit: make(chan error, 1), answers: make(chan []byte, 64), synced: make(chan uint32, 1)}
	files, err := l.rtdFiles(p, fds[1])
	defer closeFiles(files) // the child holds its own copies
	if err != nil {
		p.close()
		return nil, err
	}
	p.cmd = exec.Command(l.helper)
	p.cmd.ExtraFiles = files
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		p.close()
		return nil, fmt.Errorf("realtime: start %s: %w", l.helper, err)
	}
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

// rtdFiles are the descriptors lanes-rtd starts with (rtd/ctl.h,
// RTD_FD_*): its end of the control socket ctl, the senders and, with a
// trace, the write end of the trace pipe, whose read end goes to p.
func (l *Lane) rtdFiles(p *rtdProc, ctl int) ([]*os.File, error) {
	files := []*os.File{os.NewFile(uintptr(ctl), "lanes-rtd control")}
	for fam := range l.tx {
		for kind := range l.tx[fam] {
			files = append(files, dupFile(l.tx[fam][kind]))
		}
	}
	if l.trace != nil {
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

// configureHelper sends the configuration and the route guess and waits
// for lanes-rtd to say it is ready.
func (l *Lane) configureHelper(p *rtdProc) error {
	if err := l.sendConfig(p); err != nil {
		return fmt.Errorf("realtime: configure lanes-rtd: %w", err)
	}
	if err := p.sendRoute(netip.Addr{}, (*l.route.routes.Load())[netip.Addr{}]); err != nil {
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

// handOver gives a granted connection to lanes-rtd and closes the lane's
// descriptor; false if that failed (the caller serves it).
func (l *Lane) handOver(c *conn) bool {
	p := l.rtd
	l.clients.mu.Lock()
	l.clients.nextConn++
	id := l.clients.nextConn
	l.clients.handed[id] = c
	l.clients.mu.Unlock()
	if err := p.send(&rtdConnMsg{H: rtdHdr{Type: rtdConn, Conn: id}, UID: c.uid}, c.fd); err != nil {
		l.clients.mu.Lock()
		delete(l.clients.handed, id)
		l.clients.mu.Unlock()
		l.log.Warn("realtime: lanes-rtd did not take a client", "err", err)
		return false
	}
	unix.Close(c.fd)
	c.fd = -1
	return true
}

// followHelper moves lanes-rtd to the priority its clients need: the
// highest any granted client's reader would have in this process. It also
// puts it back there when anyone else changed it (sched_getattr, once a
// period): root may move lanes-rtd, and a move to background made it
// SCHED_OTHER nice 19 for good.
func (l *Lane) followHelper() {
	rule := priorityRule{release: l.cfg.ReleasePriority, follow: l.cfg.FollowClientPriority}
	l.clients.mu.Lock()
	want := l.cfg.ReleasePriority
	for _, c := range l.clients.handed {
		if rule.follows(c) {
			want = max(want, rule.readerPriority(clientPriority(c.pid)))
		}
	}
	l.clients.mu.Unlock()
	pid := l.rtd.cmd.Process.Pid
	if a, err := unix.SchedGetAttr(pid, 0); err == nil && a.Policy == unix.SCHED_FIFO && int(a.Priority) == want {
		l.helperPrio = want
		return
	}
	if err := setThreadFIFO(pid, want); err != nil {
		l.log.Debug("realtime: lanes-rtd priority not moved", "priority", want, "err", err)
		return
	}
	if want == l.helperPrio {
		l.log.Warn("realtime: lanes-rtd's scheduling was changed from outside; restored", "priority", want)
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
