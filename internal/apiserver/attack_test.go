// attack_test.go: the API socket flooded by an unprivileged local user
// (acting as nobody: testutil.AsUser).
package apiserver

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// sharedSocketPath is a socket path in a directory other users can enter
// (t.TempDir's is root's only); the test must run as root.
func sharedSocketPath(t *testing.T) string {
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp("", "lanes-api")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "lanes.sock")
}

// TestAttackConnFlood: connections to the 0666 API socket were unbounded.
// Fix: at most MaxConnsPerUID per uid (MaxConns in all); one more gets an
// error line and is closed, and other users still get in.
func TestAttackConnFlood(t *testing.T) {
	path := sharedSocketPath(t)
	var err error
	serve(t, path, &handler{})

	const n = MaxConnsPerUID + 20
	served, refused := 0, 0
	for i := range n {
		var c *client.Client
		testutil.AsUser(t, testutil.Nobody, testutil.Nobody, nil, func() error { c, err = client.Dial(path); return nil })
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		switch err := c.Ping(); {
		case err == nil:
			served++
		case strings.Contains(err.Error(), "too many connections"):
			refused++
		default:
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	if served != MaxConnsPerUID || refused != n-served {
		t.Errorf("served %d (want %d), refused %d", served, MaxConnsPerUID, refused)
	}
	c, err := client.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Errorf("root after the flood: %v", err)
	}
}

// TestRootConnectsWhenConnectionsFull (audit D10): 16 users holding 32 idle
// connections each filled MaxConns, and root got "too many connections (512
// open, max 512)". Fix: ReservedConns of MaxConns are root's and the access
// group's, who have no per-uid bound.
func TestRootConnectsWhenConnectionsFull(t *testing.T) {
	path := sharedSocketPath(t)
	var err error
	serve(t, path, &handler{})
	served := 0
	for u := range uint32(16) {
		uid := 70001 + u
		for range MaxConnsPerUID {
			var c *client.Client
			testutil.AsUser(t, uid, uid, nil, func() error { c, err = client.Dial(path); return nil })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if c.Ping() == nil {
				served++
			}
		}
	}
	if served != MaxConns-ReservedConns {
		t.Errorf("16 users got %d connections, want %d", served, MaxConns-ReservedConns)
	}
	for i := range 40 { // root, more than its per-uid bound
		c, err := client.Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.Ping(); err != nil {
			t.Fatalf("root's connection %d after 16 users filled theirs: %v", i, err)
		}
	}
}

// slowHandler's SocketLanes holds each call until release is closed and
// records how many ran at once.
type slowHandler struct {
	handler
	release   chan struct{}
	mu        sync.Mutex
	now, most int
}

func (h *slowHandler) running() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *slowHandler) SocketLanes(c []uint64) (map[uint64]lane.Lane, error) {
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	<-h.release
	h.mu.Lock()
	h.now--
	h.mu.Unlock()
	return nil, nil
}

// TestOthersLeaveRootAProcessor (audit D1): eight users' costly socket-lanes
// requests ran on every Go processor at once, and root's status waited up
// to a scheduler time slice behind them (8.8-24 ms on 2 cores). Fix: at
// most othersAtOnce unprivileged requests are handled at once; root's are
// not counted.
func TestOthersLeaveRootAProcessor(t *testing.T) {
	path := sharedSocketPath(t)
	var err error
	h := &slowHandler{release: make(chan struct{})}
	serve(t, path, h)
	const users = 8
	done := make(chan error, users)
	for u := range uint32(users) {
		var c *client.Client
		testutil.AsUser(t, 70001+u, 70001+u, nil, func() error { c, err = client.Dial(path); return nil })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() { _, err := c.SocketLanes([]uint64{1}); done <- err }()
	}
	root, err := client.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	go func() { _, err := root.SocketLanes([]uint64{1}); done <- err }()
	want := othersAtOnce() + 1 // the users' slots and root's request
	for end := time.Now().Add(5 * time.Second); h.running() < want && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // time for more to start, were they let
	close(h.release)
	for range users + 1 {
		if err := <-done; err != nil {
			t.Errorf("socket-lanes: %v", err)
		}
	}
	if h.most != want {
		t.Errorf("%d requests handled at once, want %d: %d users' and root's", h.most, want, want-1)
	}
}
