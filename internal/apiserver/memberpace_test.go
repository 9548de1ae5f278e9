// memberpace_test.go: members of the access group are paced as other
// callers, and their log lines bounded (N11).
package apiserver

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/testutil"
)

// syncWriter is a bytes.Buffer safe for the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestMembersPaced (audit N11): an access-group member looping
// register/unregister on 8 connections made 4,414 requests a second (the
// daemon at 101 % of a core, root's status p99 48.6 ms) and 132,000 log
// lines (20 MB) in 15 s: members were neither paced nor their lines
// bounded. Fix: every caller but root is paced, and its lines are bounded
// per uid (the next line says how many were left out).
func TestMembersPaced(t *testing.T) {
	testutil.RequireRoot(t)
	const member = 65534
	path := filepath.Join(t.TempDir(), "lanes.sock")
	for dir := filepath.Dir(path); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755) // t.TempDir is 0700: let the member reach the socket
	}
	h := &handler{acc: Access{Group: "lanes"}}
	var logs syncWriter
	s, err := Listen(path, h, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(t.Context()) }()
	t.Cleanup(func() { s.Close(); <-done })
	var c *client.Client
	testutil.AsUser(t, member, member, []uint32{777}, func() (err error) { c, err = client.Dial(path); return err })
	defer c.Close()
	const requests = 300
	t0 := time.Now()
	for range requests {
		if err := c.Unregister(api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}); err == nil {
			t.Fatal("unregister of nothing succeeded")
		}
	}
	elapsed := time.Since(t0)
	s.pace.mu.Lock()
	_, paced := s.pace.byUID[member]
	s.pace.mu.Unlock()
	if !paced {
		t.Error("an access-group member's requests were not paced")
	}
	lines := strings.Count(logs.String(), `msg="api change"`)
	if bound := logBurst + int(elapsed.Seconds()*logRate) + 1; lines > bound {
		t.Errorf("a member's %d requests in %v wrote %d log lines, bound %d", requests, elapsed, lines, bound)
	}
	t.Logf("%d requests in %v: %d log lines", requests, elapsed.Round(time.Millisecond), lines)
}
