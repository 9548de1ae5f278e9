// serve.go: the dashboard's HTTP server, bounded against clients that do
// not read and against DNS rebinding.
//
//   - The snapshot is encoded once per sample and the same bytes are
//     written to every client: a client that never reads holds a socket
//     buffer, not a copy (each held ~2 MB at 5,000 flows before).
//   - Reads, writes and idle keep-alives time out; at most MaxConns
//     connections are open at once, and a new one takes the slot of the
//     one that has moved no bytes for the longest (limitListener); a
//     connection closed for its client's stall is reset, its unsent bytes
//     freed at once (slotConn).
//   - A request whose Host is a name other than localhost (or a name the
//     user listens on) is refused: a page on another site that rebinds its
//     name to 127.0.0.1 cannot read the flows, PIDs and process names.
//   - Other users' PIDs and process names only to root and SeesAll
//     (viewer.go).
package dashboard

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the HTTP server (Config's zero values take these).
const (
	DefaultMaxConns     = 64
	DefaultWriteTimeout = 10 * time.Second
	DefaultIdleTimeout  = 30 * time.Second
)

// HTTPServer is the dashboard's http.Server: the handler behind the Host
// check, with timeouts. Serve it on Listener(ln).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.hostCheck(s.Handler()),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    8 << 10,
		ConnContext:       s.connViewer,
	}
}

// Listener bounds ln to the server's MaxConns open connections.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return newLimitListener(ln, s.cfg.MaxConns)
}

// hostCheck refuses a Host that names another site (DNS rebinding).
func (s *Server) hostCheck(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			http.Error(w, "host not allowed: open the dashboard by its address or localhost", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true // an address: a rebinding page cannot name it
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, a := range s.cfg.Hosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// snapshotJSON is the current snapshot encoded for viewer v (all: it
// sees every flow's pid and comm), shared by every request of its kind
// until the next sample.
func (s *Server) snapshotJSON(v viewer, all bool) ([]byte, error) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	if s.jsonGen != gen || s.jsonFor == nil {
		s.json, s.jsonFor, s.jsonGen = nil, map[viewer][]byte{}, gen
	}
	if all && s.json != nil {
		return s.json, nil
	}
	if b, ok := s.jsonFor[v]; !all && ok {
		return b, nil
	}
	snap := s.Snapshot()
	if !all {
		snap = redact(snap, v)
	}
	b, err := encodeSnapshot(snap)
	if err != nil {
		return nil, err
	}
	if all {
		s.json = b
	} else {
		s.jsonFor[v] = b
	}
	return b, nil
}

// limitListener keeps at most max connections open. When a new one
// arrives with every slot taken, the open connection that has moved no
// bytes for the longest, and for at least stallGrace, is closed for it: a
// client that stopped reading (or an idle keep-alive) gives its slot to
// the next one, so clients that never read cannot keep a reading one out.
// Only when every open connection is moving bytes does a new one wait.
type limitListener struct {
	net.Listener
	max   int
	mu    sync.Mutex
	open  map[*slotConn]struct{}
	freed chan struct{}
}

// stallGrace is how long a connection may move no bytes before a new
// connection may take its slot (a reading client on loopback moves bytes
// every few microseconds while it is served).
const stallGrace = 250 * time.Millisecond

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: max, open: map[*slotConn]struct{}{}, freed: make(chan struct{}, 1)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &slotConn{Conn: c, l: l}
	sc.touch()
	for !l.admit(sc) {
		if v := l.mostStalled(); v != nil {
			v.abort()
			continue
		}
		select {
		case <-l.freed:
		case <-time.After(stallGrace / 4):
		}
	}
	return sc, nil
}

// admit takes a slot for c if one is free.
func (l *limitListener) admit(c *slotConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.open) >= l.max {
		return false
	}
	l.open[c] = struct{}{}
	return true
}

// mostStalled is the open connection idle the longest, past stallGrace.
func (l *limitListener) mostStalled() *slotConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var worst *slotConn
	oldest := time.Now().Add(-stallGrace).UnixNano()
	for c := range l.open {
		if p := c.progress.Load(); p <= oldest {
			worst, oldest = c, p
		}
	}
	return worst
}

func (l *limitListener) release(c *slotConn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// slotConn records when it last moved bytes and gives its slot back once,
// when closed. A connection closed for its client's stall (its slot taken,
// or a write timed out) is reset, not closed gracefully: a graceful close
// leaves an orphan socket holding what the client did not read (up to
// tcp_wmem's 4 MB each) until its retries end, and 2,000 such orphans took
// the host's whole TCP memory (tcp_mem), so that the kernel reset other
// programs' connections ("TCP: out of memory -- consider tuning tcp_mem").
type slotConn struct {
	net.Conn
	l        *limitListener
	progress atomic.Int64 // unix ns of the last read or write that moved bytes
	stalled  atomic.Bool  // a write timed out: the client does not read
	once     sync.Once
}

func (c *slotConn) touch() { c.progress.Store(time.Now().UnixNano()) }

func (c *slotConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *slotConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.stalled.Store(true)
	}
	return n, err
}

// abort closes c discarding what it has not sent (SO_LINGER 0: a reset).
func (c *slotConn) abort() error {
	c.stalled.Store(true)
	return c.Close()
}

func (c *slotConn) Close() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok && c.stalled.Load() {
		_ = tc.SetLinger(0)
	}
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
