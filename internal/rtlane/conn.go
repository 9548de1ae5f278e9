// conn.go: the realtime lane's client connections, the part of the lane any
// local user reaches (the socket is 0666).
//
//   - accept: credentials are taken once, at accept, from the kernel
//     (SO_PEERCRED, SO_PEERGROUPS: package peercred), and the grant decided
//     from them. A connection over max_conns in total or max_conns_per_uid
//     of its uid gets one too-many-connections error and is closed.
//   - granted clients: the connection goes to lanes-rtd (rtd.go), which
//     reads and answers it from then on; the lane counts it until lanes-rtd
//     says it has ended.
//   - everyone else: a goroutine on Go's netpoller (non-blocking socket)
//     answers every datagram and attach with not-granted: what an
//     unprivileged user can make the daemon hold is a parked goroutine,
//     bounded by the limits above; its recvmsg has no control buffer, so the
//     kernel discards any descriptors it sends. Its requests are paced per
//     uid, client_requests per second (pace.go).
//   - the accept loop survives resource errors (EMFILE, ENFILE, ENOBUFS,
//     ENOMEM): it counts them, logs at most once a second, backs off up to
//     a second and accepts again; only other errors end Run (the daemon
//     then restarts the lane).
//   - a STATS reply shows root every flow and anyone else their own uid's
//     flows, trimmed to fit wire.MaxReply.
package rtlane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/peercred"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// conn is one client connection.
type conn struct {
	l       *Lane
	fd      int // -1 once handed to lanes-rtd
	uid     uint32
	pid     int32
	granted bool
	// not granted: the socket is non-blocking and owned by file, read and
	// written through raw on Go's netpoller.
	file *os.File
	raw  syscall.RawConn
}

// connStats are the connection counters of a Snapshot.
type connStats struct {
	Conns        int    `json:"conns"`
	RefusedConns uint64 `json:"refused_conns"` // over max_conns or max_conns_per_uid
	AcceptErrors uint64 `json:"accept_errors"` // EMFILE and the like, survived
	// PMLatencyUS is the CPU wake-up latency the lane holds now (wake.go),
	// -1 if none; PMError why holding it failed.
	PMLatencyUS int    `json:"pm_latency_us"`
	PMError     string `json:"pm_error,omitempty"`
	// AppSocks: clients' own sockets attached and not yet closed.
	AppSocks int64 `json:"app_socks"`
}

// connTable is the lane's client connections: their limits, those handed
// to lanes-rtd by id, and the wake-up latency request they hold.
type connTable struct {
	mu        sync.Mutex // conns, perUID, others, closed, handed, nextConn, wake
	conns     map[*conn]struct{}
	perUID    map[uint32]int
	others    int // connections of clients neither root nor granted
	closed    bool
	handed    map[uint32]*conn // the connections lanes-rtd serves, by id
	nextConn  uint32
	wake      wakeState // the PM QoS request while granted clients are connected (wake.go)
	maxConns  int       // Config.MaxConns
	maxPerUID int       // Config.MaxConnsPerUID

	refusedConns atomic.Uint64
	acceptErrors atomic.Uint64
}

func newConnTable(cfg config.Realtime) connTable {
	return connTable{conns: map[*conn]struct{}{}, perUID: map[uint32]int{}, handed: map[uint32]*conn{},
		maxConns: cfg.MaxConns, maxPerUID: cfg.MaxConnsPerUID}
}

// counters are the connection counters now.
func (t *connTable) counters() connStats {
	t.mu.Lock()
	n := len(t.conns)
	pm, pmErr := t.wake.wakeStats()
	t.mu.Unlock()
	return connStats{Conns: n, RefusedConns: t.refusedConns.Load(), AcceptErrors: t.acceptErrors.Load(),
		PMLatencyUS: pm, PMError: pmErr}
}

// acceptLoop accepts clients until the listener is shut down.
func (l *Lane) acceptLoop(ctx context.Context, wg *sync.WaitGroup) error {
	var backoff time.Duration
	var lastLog time.Time
	for {
		nfd, _, err := unix.Accept4(l.lfd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		switch {
		case err == nil:
			backoff = 0
			l.startConn(nfd, wg)
			continue
		case err == unix.EINTR || err == unix.ECONNABORTED:
			continue
		case ctx.Err() != nil || l.isClosed():
			return nil
		case err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOBUFS || err == unix.ENOMEM:
			l.clients.acceptErrors.Add(1)
			if time.Since(lastLog) > time.Second {
				lastLog = time.Now()
				l.log.Warn("realtime: accept failed, retrying", "err", err, "failures", l.clients.acceptErrors.Load())
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-ctx.Done():
			case <-l.done:
			case <-time.After(backoff):
			}
		default:
			return fmt.Errorf("realtime: accept: %w", err)
		}
	}
}

// startConn authorizes a new connection and starts its reader, or refuses it.
func (l *Lane) startConn(fd int, wg *sync.WaitGroup) {
	cred, err := peercred.Of(fd)
	if err != nil {
		l.log.Warn("realtime: refusing client", "err", err)
		unix.Close(fd)
		return
	}
	c := &conn{l: l, fd: fd, uid: cred.UID, pid: cred.PID,
		granted: l.cfg.Grants.Allows(cred.UID, append([]uint32{cred.GID}, cred.Groups...))}
	if err := l.clients.track(c); err != nil {
		l.clients.refusedConns.Add(1)
		refuse(fd)
		l.log.Debug("realtime: refusing client", "uid", cred.UID, "pid", cred.PID, "err", err)
		return
	}
	if c.granted {
		if err := l.clients.handOver(l.rtd, c); err != nil {
			l.log.Warn("realtime: lanes-rtd did not take a client", "err", err)
			l.clients.untrack(c)
			unix.Close(fd)
			return
		}
		l.log.Debug("realtime client handed to lanes-rtd", "uid", cred.UID, "pid", cred.PID)
		return
	}
	c.file = os.NewFile(uintptr(fd), "realtime-client")
	if c.raw, err = c.file.SyscallConn(); err != nil {
		l.clients.untrack(c)
		c.file.Close()
		return
	}
	l.log.Debug("realtime client", "uid", cred.UID, "pid", cred.PID, "granted", c.granted)
	wg.Add(1)
	go func() { defer wg.Done(); c.serve() }()
}

// refuse answers a connection over the limits with one too-many-connections
// error and closes it. Shut down and drained first: closing a socket with
// unread requests would reset the peer's, losing the error reply.
func refuse(fd int) {
	b := wire.AppendReply(nil, &wire.Reply{Type: wire.TypeError, Reason: wire.ReasonBusy, Time: uint64(monoclock.Now())})
	_ = unix.Sendmsg(fd, b, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	_ = unix.Shutdown(fd, unix.SHUT_RDWR)
	var buf [64]byte
	for i := 0; i < 1024; i++ {
		if n, _, err := unix.Recvfrom(fd, buf[:], unix.MSG_DONTWAIT|unix.MSG_TRUNC); n <= 0 || err != nil {
			break
		}
	}
	unix.Close(fd)
}

// reservedConns is the part of max_conns only root and granted clients
// may use (root has no per-uid bound either): however many users hold
// connections, the administrator and the granted applications get in.
func reservedConns(maxConns int) int { return max(1, maxConns/8) }

// trusted: root or a granted client.
func (c *conn) trusted() bool { return c.uid == 0 || c.granted }

// track counts c against the connection limits.
func (t *connTable) track(c *conn) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return errors.New("shutting down")
	case len(t.conns) >= t.maxConns:
		return fmt.Errorf("%d connections open (max_conns)", len(t.conns))
	case c.uid != 0 && t.perUID[c.uid] >= t.maxPerUID:
		return fmt.Errorf("uid %d has %d connections open (max_conns_per_uid)", c.uid, t.perUID[c.uid])
	case !c.trusted() && t.others >= t.maxConns-reservedConns(t.maxConns):
		return fmt.Errorf("%d connections of ungranted users open (max_conns less the reserve)", t.others)
	}
	t.conns[c] = struct{}{}
	t.perUID[c.uid]++
	if !c.trusted() {
		t.others++
	}
	if c.granted {
		t.wake.grantedJoined()
	}
	return nil
}

func (t *connTable) untrack(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
	if t.perUID[c.uid]--; t.perUID[c.uid] <= 0 {
		delete(t.perUID, c.uid)
	}
	if !c.trusted() {
		t.others--
	}
	if c.granted {
		t.wake.grantedLeft()
	}
}

// serve answers an ungranted client's requests until it closes.
func (c *conn) serve() {
	defer func() {
		c.l.clients.untrack(c)
		c.file.Close()
	}()
	buf := make([]byte, wire.RequestSize+wire.MaxPayload+1)
	out := make([]byte, 0, wire.ReplySize+4096)
	for {
		n, flags, err := c.recv(buf)
		if err != nil || n == 0 {
			return // closed
		}
		if d := c.l.pace.delay(c.uid, time.Now()); d > 0 {
			time.Sleep(d) // its uid's next token; the requests after it wait in the socket
		}
		rep := c.answer(buf[:n], flags)
		out = wire.AppendReply(out[:0], &rep)
		if c.send(out) != nil {
			return
		}
	}
}

// answer is the reply to an ungranted client's request: datagrams and
// attaches are refused (not-granted, counted), stats are given.
func (c *conn) answer(msg []byte, flags int) wire.Reply {
	req, perr := wire.ParseRequest(msg)
	rep := wire.Reply{Type: wire.TypeReject, Flow: req.Flow, Seq: req.Seq, Time: uint64(monoclock.Now())}
	switch {
	case flags&unix.MSG_TRUNC != 0 || len(msg) > wire.RequestSize+wire.MaxPayload:
		rep.Reason = wire.ReasonTooBig
	case perr != nil:
		rep = wire.Reply{Type: wire.TypeError, Reason: wire.ReasonMalformed, Time: rep.Time}
	case req.Type == wire.TypeSend:
		rep.Reason = wire.ReasonNotGranted
		c.l.own.mu.Lock()
		c.l.own.countLocked(flowKey{c.uid, req.Flow}, false, wire.ReasonNotGranted)
		c.l.own.mu.Unlock()
	case req.Type == wire.TypeAttach:
		rep.Reason = wire.ReasonNotGranted
	case req.Type == wire.TypeStats:
		rep = wire.Reply{Type: wire.TypeStatsOK, Flow: req.Flow, Seq: req.Seq, Body: c.l.statsBody(c.uid), Time: rep.Time}
	default:
		rep.Type, rep.Reason = wire.TypeError, wire.ReasonMalformed
	}
	return rep
}

// recv reads one message on the netpoller, without a control buffer.
func (c *conn) recv(buf []byte) (n, flags int, err error) {
	rerr := c.raw.Read(func(fd uintptr) bool {
		n, _, flags, _, err = unix.Recvmsg(int(fd), buf, nil, unix.MSG_TRUNC)
		return err != unix.EAGAIN && err != unix.EINTR
	})
	return min(n, len(buf)), flags, errors.Join(rerr, err)
}

// send writes one reply.
func (c *conn) send(b []byte) error {
	var err error
	werr := c.raw.Write(func(fd uintptr) bool {
		err = unix.Sendmsg(int(fd), b, nil, nil, unix.MSG_NOSIGNAL)
		return err != unix.EAGAIN && err != unix.EINTR
	})
	return errors.Join(werr, err)
}

// statsBody is the STATS reply's JSON for a caller: root sees every flow,
// anyone else the totals and their own uid's flows. Flows are dropped (and
// Truncated set) until the body fits wire.MaxReplyBody.
func (l *Lane) statsBody(uid uint32) []byte {
	s := l.clientStats(uid)
	if uid != 0 {
		own := s.Flows[:0]
		for _, f := range s.Flows {
			if f.UID == uid {
				own = append(own, f)
			}
		}
		s.Flows = own
	}
	for {
		body, err := json.Marshal(s)
		if err != nil {
			return []byte(`{"error":"stats not encodable"}`)
		}
		if len(body) <= wire.MaxReplyBody || len(s.Flows) == 0 {
			return body
		}
		s.Truncated = true
		s.Flows = s.Flows[:len(s.Flows)*3/4]
	}
}

// peerLive reports whether a listener answers on the unix socket path: a
// live daemon's socket must never be replaced, a stale one may.
func peerLive(path string) bool {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	return err != unix.ECONNREFUSED && err != unix.ENOENT
}
