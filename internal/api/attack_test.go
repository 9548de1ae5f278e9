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
