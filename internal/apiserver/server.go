// Package apiserver is the daemon's side of the lanes API (the protocol is
// internal/api): who may do what, the unix-socket server and its limits.
//
// server.go: the server. One goroutine per connection
// (on Go's netpoller, no thread of its own); the caller's credentials are
// taken once at accept (SO_PEERCRED, SO_PEERGROUPS); every request is
// decoded, authorized against them and handed to the daemon's Handler.
// Nothing a client sends can crash it: bad lines get an error reply,
// over-long lines close the connection after one, connections beyond
// MaxConnsPerUID of one uid or MaxConns in all get one error line and are
// closed. Every change (register, unregister, move-pid), allowed or refused,
// is logged with the caller.
package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/peercred"
)

// Connection limits of the API socket (0666: any local user reaches it).
const (
	MaxConns       = 512
	MaxConnsPerUID = 32
	// ReservedConns of MaxConns only root and the policy's access group
	// may use, and they have no per-uid bound: however many users hold
	// connections, the administrator gets in.
	ReservedConns = 64
)

// Handler is what the daemon does for each request. Authorization has been
// checked before a Handler method is called.
type Handler interface {
	Status() (*api.Status, error)
	Flows() ([]api.FlowInfo, error)
	Register(c Cred, f api.Flow, l lane.Lane) error
	Unregister(c Cred, f api.Flow) error
	MovePID(c Cred, pid int, l lane.Lane, keepSched bool) (api.Moved, error)
	LaneCgroup(l lane.Lane) (string, error)
	SocketLanes(cookies []uint64) (map[uint64]lane.Lane, error)
	// Component returns a running component's status document.
	Component(name string) (json.RawMessage, error)
	Owners() Owners
	// Access is the policy's access group and realtime grants.
	Access() Access
	// SocketReasons: what decided each socket's lane, returned beside the
	// lanes in the socket-lanes reply.
	SocketReasons(cookies []uint64) (map[uint64]string, error)
	// SocketAppCCs: the congestion control each background socket's app
	// asked for (and did not get); OwnCCs: the kernel names of lanes' own
	// congestion controls. Both in the socket-lanes reply.
	SocketAppCCs(cookies []uint64) map[uint64]string
	OwnCCs() map[string]string
	// UDPFlows: a page of the UDP flows with their lanes and why, from
	// index from, and how many follow it.
	UDPFlows(from int) ([]api.UDPFlow, int, error)
}

// Server serves the protocol on a unix socket.
type Server struct {
	h         Handler
	ln        *net.UnixListener
	path      string
	wg        sync.WaitGroup
	mu        sync.Mutex
	conn      map[net.Conn]struct{}
	perUID    map[uint32]int
	others    int // connections of unprivileged callers
	pace      pacer
	others1   chan struct{} // slots of unprivileged requests handled at once (see othersAtOnce)
	closed    chan struct{} // closed by Close: ends the waits of paced requests
	closeOnce sync.Once
	log       *slog.Logger
	logs      logPacer // callers' lines but root's (logpace.go)
	events    hub      // the events streams (events.go)
}

// Listen creates the socket (replacing a stale one) with mode 0666: anyone
// may connect, what they may do is decided per request from SO_PEERCRED.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("api socket dir: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("api socket %s: another daemon is already listening there", path)
	}
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("api listen: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("api socket mode: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	closed := make(chan struct{})
	return &Server{h: h, ln: ln, path: path, conn: map[net.Conn]struct{}{}, perUID: map[uint32]int{},
		others1: make(chan struct{}, othersAtOnce()), closed: closed, log: log,
		events: hub{status: h.Status, closed: closed}}, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Serve accepts connections until ctx ends or Close is called.
func (s *Server) Serve(ctx context.Context) error {
	go func() { <-ctx.Done(); s.ln.Close() }()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			s.log.Warn("api accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		cred, err := peerCred(c)
		if err != nil {
			s.log.Warn("api: no peer credentials, closing", "err", err)
			c.Close()
			continue
		}
		priv := Privileged(cred, s.h.Owners(), s.h.Access().Group)
		if err := s.track(c, cred.UID, priv); err != nil {
			refuse(c, err)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c, cred)
			s.untrack(c, cred.UID, priv)
		}()
	}
}

// refuse answers a connection over the limits with one error line and
// closes it; shut down and drained first, since closing with unread
// requests would reset the peer's socket and lose the line.
func refuse(c *net.UnixConn, why error) {
	b, _ := json.Marshal(&api.Response{Error: why.Error()})
	if raw, err := c.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			_, _ = unix.Write(int(fd), append(b, '\n'))
			_ = unix.Shutdown(int(fd), unix.SHUT_RDWR)
			var buf [4096]byte
			for i := 0; i < 64; i++ {
				if n, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_DONTWAIT); n <= 0 || err != nil {
					break
				}
			}
		})
	}
	c.Close()
}

// track counts a new connection against the limits (priv: root or the
// access group).
func (s *Server) track(c net.Conn, uid uint32, priv bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conn) >= MaxConns {
		return fmt.Errorf("too many connections (%d open, max %d)", len(s.conn), MaxConns)
	}
	if !priv {
		if s.others >= MaxConns-ReservedConns {
			return fmt.Errorf("too many connections (%d of unprivileged users open, max %d)", s.others, MaxConns-ReservedConns)
		}
		if s.perUID[uid] >= MaxConnsPerUID {
			return fmt.Errorf("too many connections of uid %d (max %d)", uid, MaxConnsPerUID)
		}
		s.others++
	}
	s.conn[c] = struct{}{}
	s.perUID[uid]++
	return nil
}

func (s *Server) untrack(c net.Conn, uid uint32, priv bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conn, c)
	if s.perUID[uid]--; s.perUID[uid] <= 0 {
		delete(s.perUID, uid)
	}
	if !priv {
		s.others--
	}
}

// Close stops accepting, closes open connections and waits for them.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.closeOnce.Do(func() { close(s.closed) })
	s.mu.Lock()
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func peerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var pc peercred.Cred
	var perr error
	if err := raw.Control(func(fd uintptr) { pc, perr = peercred.Of(int(fd)) }); err != nil {
		return Cred{}, err
	}
	if perr != nil {
		return Cred{}, perr
	}
	return Cred{PID: pc.PID, UID: pc.UID, GID: pc.GID, Groups: pc.Groups}, nil
}

func (s *Server) serveConn(c *net.UnixConn, cred Cred) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), api.MaxLine)
	w := bufio.NewWriter(c)
	// members of the access group are paced as other callers: a member's
	// register/unregister loop on 8 connections made 4,414 requests a
	// second (101 % of a core, root's status p99 48.6 ms); root alone is not
	priv := cred.UID == 0
	for sc.Scan() {
		if !priv {
			if d := s.pace.wait(cred.UID, requestCost(len(sc.Bytes())), time.Now()); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-s.closed: // a stopping daemon does not wait out a flood's debt
					t.Stop()
					return
				}
			}
		}
		resp, took, ok := s.handleAs(priv, cred, sc.Bytes())
		if !ok {
			return
		}
		t0 := time.Now()
		err := writeLine(w, encodeResponse(resp))
		if !priv { // its debt delays the caller's next request
			took += time.Since(t0)
			s.pace.wait(cred.UID, moveCost(resp.Moved)+workCost(took), time.Now())
		}
		if err != nil {
			return
		}
		if resp.Stream {
			s.stream(c, sc, w)
			return
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		_ = writeResponse(w, &api.Response{Error: fmt.Sprintf("request longer than %d bytes", api.MaxLine)})
	}
}

// othersAtOnce is how many unprivileged requests are handled at once: one
// fewer than the Go processors (at least one), so that a flood of costly
// requests from local users leaves a processor for root's requests and the
// daemon's own loops: root's status during a flood of full socket-lanes
// requests on 2 cores took up to 12.5-29 ms without it, 3.4-10.8 ms with
// it (docs/api.md, "Limits").
func othersAtOnce() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// handleAs handles one request; an unprivileged one waits for a slot of
// others1 first (ok false: the server closed during the wait). The slot is
// held for the handling only, never for the write of the response, which
// a client that does not read could hold up.
func (s *Server) handleAs(priv bool, cred Cred, line []byte) (resp *api.Response, took time.Duration, ok bool) {
	if priv {
		return s.handle(cred, line), 0, true
	}
	select {
	case s.others1 <- struct{}{}:
	case <-s.closed:
		return nil, 0, false
	}
	defer func() { <-s.others1 }()
	t0 := time.Now()
	resp = s.handle(cred, line)
	return resp, time.Since(t0), true
}

func (s *Server) handle(cred Cred, line []byte) (resp *api.Response) {
	defer func() {
		if p := recover(); p != nil { // a bug in a handler must not take the daemon down
			s.log.Error("api: handler panic", "panic", p)
			resp = &api.Response{Error: "internal error"}
		}
	}()
	req, err := api.DecodeRequest(line)
	if err != nil {
		return &api.Response{Error: err.Error()}
	}
	acc := s.h.Access()
	cred.Privileged = Privileged(cred, s.h.Owners(), acc.Group)
	if err := Authorize(cred, req, s.h.Owners(), acc); err != nil {
		s.logFor(cred.UID, "api: refused", "op", req.Op, "uid", cred.UID, "pid", cred.PID, "err", err)
		return &api.Response{Error: err.Error()}
	}
	if changes(req.Op) {
		defer func() { s.audit(cred, req, resp) }()
		if cred.UID != 0 { // its debt delays the caller's next request
			s.pace.wait(cred.UID, changeCost, time.Now())
		}
	}
	r := &api.Response{OK: true}
	switch req.Op {
	case api.OpPing:
	case api.OpStatus:
		r.Status, err = s.h.Status()
	case api.OpFlows:
		r.Flows, err = s.h.Flows()
	case api.OpRegister:
		err = s.h.Register(cred, *req.Flow, req.Lane)
	case api.OpUnregister:
		err = s.h.Unregister(cred, *req.Flow)
	case api.OpMovePID:
		var m api.Moved
		if m, err = s.h.MovePID(cred, req.PID, req.Lane, req.KeepSched); err == nil {
			r.Moved = &m
		}
	case api.OpLaneCgroup:
		r.Cgroup, err = s.h.LaneCgroup(req.Lane)
	case api.OpSockLanes:
		var m map[uint64]lane.Lane
		if m, err = s.h.SocketLanes(req.Cookies); err == nil {
			r.SocketLanes = make(map[string]lane.Lane, len(m))
			for c, l := range m {
				r.SocketLanes[strconv.FormatUint(c, 10)] = l
			}
			if why, werr := s.h.SocketReasons(req.Cookies); werr == nil {
				r.SocketWhy = make(map[string]string, len(why))
				for c, w := range why {
					r.SocketWhy[strconv.FormatUint(c, 10)] = w
				}
			}
			r.SocketAppCC, r.CCNames = map[string]string{}, s.h.OwnCCs()
			for c, name := range s.h.SocketAppCCs(req.Cookies) {
				r.SocketAppCC[strconv.FormatUint(c, 10)] = name
			}
		}
	case api.OpUDPFlows:
		r.UDPFlows, r.UDPMore, err = s.h.UDPFlows(req.From)
	case api.OpEvents:
		r.Stream = true
	case api.OpComponent:
		var off *api.OffError
		if r.Component, err = s.h.Component(req.Name); errors.As(err, &off) {
			r.Off, err = off.Why, nil
		}
	}
	if err != nil {
		return &api.Response{Error: err.Error()}
	}
	if changes(req.Op) {
		s.events.changed()
	}
	return r
}

func changes(op string) bool {
	return op == api.OpRegister || op == api.OpUnregister || op == api.OpMovePID
}

// audit logs a change with its caller and outcome.
func (s *Server) audit(c Cred, r api.Request, resp *api.Response) {
	attrs := []any{"op", r.Op, "uid", c.UID, "pid", c.PID, "privileged", c.Privileged}
	if r.Flow != nil {
		attrs = append(attrs, "flow", r.Flow.String())
	}
	if r.PID != 0 {
		attrs = append(attrs, "target_pid", r.PID)
	}
	if r.Lane != lane.Unset {
		attrs = append(attrs, "lane", r.Lane)
	}
	if resp != nil && !resp.OK {
		attrs = append(attrs, "err", resp.Error)
	}
	s.logFor(c.UID, "api change", attrs...)
}

func writeResponse(w *bufio.Writer, r *api.Response) error {
	return writeLine(w, encodeResponse(r))
}

// encodeResponse is r's reply line.
func encodeResponse(r *api.Response) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(`{"ok":false,"error":"internal error: reply not encodable"}`)
	}
	return append(b, '\n')
}

// writeLine writes a reply line and flushes it.
func writeLine(w *bufio.Writer, line []byte) error {
	if _, err := w.Write(line); err != nil {
		return err
	}
	return w.Flush()
}
