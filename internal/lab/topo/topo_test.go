// topo_test.go: namespace naming, leftovers of dead runs, node setup.
package topo

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/lanes-net/lanes/internal/nsrun"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestNodesAndLeftovers(t *testing.T) {
	testutil.RequireRoot(t)
	top, err := New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := top.AddNode("a", "cubic")
	if err != nil {
		top.Close()
		t.Fatal(err)
	}
	if !strings.HasPrefix(n.NS, NSPrefix) || n.Addr.String() != "10.77.0.1" {
		t.Errorf("node %s addr %s", n.NS, n.Addr)
	}
	// A namespace named after a pid that cannot exist is a dead run's.
	dead := NSPrefix + "2147483647-1-x"
	runtime.LockOSThread()
	orig, _ := netns.Get()
	h, err := nsrun.NewNamed(dead) // switches this thread: switch back
	netns.Set(orig)
	orig.Close()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Cleanup(func() { _ = netns.DeleteNamed(dead) })
	left, err := Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	var sawDead, sawLive bool
	for _, l := range left {
		sawDead = sawDead || l == dead
		sawLive = sawLive || l == n.NS
	}
	if !sawDead || sawLive {
		t.Errorf("leftovers %v: want %s and not the live %s", left, dead, n.NS)
	}
	if err := top.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/netns/" + n.NS); err == nil {
		t.Errorf("namespace %s still there after Close", n.NS)
	}
}
