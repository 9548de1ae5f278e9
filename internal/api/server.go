// server.go: the daemon side of the protocol. One goroutine per connection;
// every request is decoded, authorized against the caller's SO_PEERCRED and
// handed to the daemon's Handler. Nothing a client sends can crash it: bad
// lines get an error reply, over-long lines close the connection after one.
package api

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
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

// Handler is what the daemon does for each request. Authorization has been
// checked before a Handler method is called.
type Handler interface {
	Status() (*Status, error)
	Flows() ([]FlowInfo, error)
	Register(c Cred, f Flow, l lane.Lane) error
	Unregister(c Cred, f Flow) error
	MovePID(c Cred, pid int, l lane.Lane) error
	LaneCgroup(l lane.Lane) (string, error)
	SocketLanes(cookies []uint64) (map[uint64]lane.Lane, error)
	// Component returns a running component's status document.
	Component(name string) (json.RawMessage, error)
	Owners() Owners
	AccessGroup() string
}

// Server serves the protocol on a unix socket.
type Server struct {
	h    Handler
	ln   *net.UnixListener
	path string
	wg   sync.WaitGroup
	mu   sync.Mutex
	conn map[net.Conn]struct{}
	log  *slog.Logger
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
	return &Server{h: h, ln: ln, path: path, conn: map[net.Conn]struct{}{}, log: log}, nil
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
		s.mu.Lock()
		s.conn[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conn, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes open connections and waits for them.
func (s *Server) Close() error {
	err := s.ln.Close()
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
	var uc *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) { uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, serr
	}
	return Cred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}

func (s *Server) serveConn(c *net.UnixConn) {
	defer c.Close()
	cred, err := peerCred(c)
	if err != nil {
		s.log.Warn("api: no peer credentials, closing", "err", err)
		return
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), MaxLine)
	w := bufio.NewWriter(c)
	for sc.Scan() {
		resp := s.handle(cred, sc.Bytes())
		if err := writeResponse(w, resp); err != nil {
			return
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		_ = writeResponse(w, &Response{Error: fmt.Sprintf("request longer than %d bytes", MaxLine)})
	}
}

func (s *Server) handle(cred Cred, line []byte) (resp *Response) {
	defer func() {
		if p := recover(); p != nil { // a bug in a handler must not take the daemon down
			s.log.Error("api: handler panic", "panic", p)
			resp = &Response{Error: "internal error"}
		}
	}()
	req, err := DecodeRequest(line)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	if err := Authorize(cred, req, s.h.Owners(), s.h.AccessGroup()); err != nil {
		s.log.Info("api: refused", "op", req.Op, "uid", cred.UID, "pid", cred.PID, "err", err)
		return &Response{Error: err.Error()}
	}
	r := &Response{OK: true}
	switch req.Op {
	case OpPing:
	case OpStatus:
		r.Status, err = s.h.Status()
	case OpFlows:
		r.Flows, err = s.h.Flows()
	case OpRegister:
		err = s.h.Register(cred, *req.Flow, req.Lane)
	case OpUnregister:
		err = s.h.Unregister(cred, *req.Flow)
	case OpMovePID:
		err = s.h.MovePID(cred, req.PID, req.Lane)
	case OpLaneCgroup:
		r.Cgroup, err = s.h.LaneCgroup(req.Lane)
	case OpSockLanes:
		var m map[uint64]lane.Lane
		if m, err = s.h.SocketLanes(req.Cookies); err == nil {
			r.SocketLanes = make(map[string]lane.Lane, len(m))
			for c, l := range m {
				r.SocketLanes[strconv.FormatUint(c, 10)] = l
			}
		}
	case OpComponent:
		r.Component, err = s.h.Component(req.Name)
	}
	if err != nil {
		return &Response{Error: err.Error()}
	}
	return r
}

func writeResponse(w *bufio.Writer, r *Response) error {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(`{"ok":false,"error":"internal error: reply not encodable"}`)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	return w.Flush()
}
