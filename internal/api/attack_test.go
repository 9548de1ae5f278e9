// attack_test.go: the API socket flooded by an unprivileged local user
// (acting as nobody: testutil.AsUser).
package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

// TestAttackConnFlood: connections to the 0666 API socket were unbounded.
// Fix: at most MaxConnsPerUID per uid (MaxConns in all); one more gets an
// error line and is closed, and other users still get in.
func TestAttackConnFlood(t *testing.T) {
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp("", "lanes-api")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "lanes.sock")
	serve(t, path, &handler{})

	const n = MaxConnsPerUID + 20
	served, refused := 0, 0
	for i := range n {
		var c *Client
		testutil.AsUser(t, testutil.Nobody, testutil.Nobody, nil, func() error { c, err = Dial(path); return nil })
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
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Errorf("root after the flood: %v", err)
	}
}

// TestD10RootNotLockedOut: 16 users holding 32 idle connections each filled
// MaxConns, and root got "too many connections (512 open, max 512)". Fix:
// ReservedConns of MaxConns are root's and the access group's, who have no
// per-uid bound.
func TestD10RootNotLockedOut(t *testing.T) {
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp("", "lanes-api")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "lanes.sock")
	serve(t, path, &handler{})
	served := 0
	for u := range uint32(16) {
		uid := 70001 + u
		for range MaxConnsPerUID {
			var c *Client
			testutil.AsUser(t, uid, uid, nil, func() error { c, err = Dial(path); return nil })
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
		c, err := Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.Ping(); err != nil {
			t.Fatalf("root's connection %d after 16 users filled theirs: %v", i, err)
		}
	}
}
