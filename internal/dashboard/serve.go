// serve.go: the dashboard's HTTP server, bounded against clients that do
// not read and against DNS rebinding.
//
//   - The snapshot is encoded once per sample and the same bytes are
//     written to every client: a client that never reads holds a socket
//     buffer, not a copy (each held ~2 MB at 5,000 flows before).
//   - Reads, writes and idle keep-alives time out; at most MaxConns
//     connections are served at once (the rest wait in the listen backlog).
//   - A request whose Host is a name other than localhost (or a name the
//     user listens on) is refused: a page on another site that rebinds its
//     name to 127.0.0.1 cannot read the flows, PIDs and process names.
package dashboard

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
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
	}
}

// Listener bounds ln to the server's MaxConns open connections.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, s.cfg.MaxConns)}
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

// snapshotJSON is the current snapshot encoded, shared by every request
// until the next sample.
func (s *Server) snapshotJSON() ([]byte, error) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	if s.json != nil && s.jsonGen == gen {
		return s.json, nil
	}
	b, err := encodeSnapshot(s.Snapshot())
	if err != nil {
		return nil, err
	}
	s.json, s.jsonGen = b, gen
	return b, nil
}

// limitListener accepts while fewer than cap(slots) connections are open.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
