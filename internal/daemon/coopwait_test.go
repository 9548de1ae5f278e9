// coopwait_test.go: a coop controller whose UDP port another user holds
// waits and starts once the port is free (N10).
package daemon_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestCoopWaitsForSquattedPort (audit N10): an unprivileged process bound UDP
// port 7431 (SO_REUSEADDR and SO_REUSEPORT) before coop started; the daemon
// did not start at all, and in a reload coop (and every component after it)
// stayed off after the squatter exited, until the next reload. Fix: coop's
// start waits (superviseWaiting): the daemon runs, status says why coop waits,
// and the start is retried on the supervisor's backoff (1 s doubling to 30 s)
// until the port is free.
func TestCoopWaitsForSquattedPort(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	squat := -1
	testutil.AsUserIn(t, p.A, nobody, nobody, nil, func() error {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		for _, o := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1)
		}
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0) // IPv4 too
		if err := unix.Bind(fd, &unix.SockaddrInet6{Port: 7431}); err != nil {
			unix.Close(fd)
			return err
		}
		squat = fd
		return nil
	})
	if squat < 0 {
		t.Fatal("nobody could not bind UDP 7431")
	}
	t.Cleanup(func() {
		if squat >= 0 {
			unix.Close(squat)
		}
	})
	pol := devicePolicy(p.LinkA) + fmt.Sprintf("coop:\n  enabled: true\n  port: 7431\n  interval: 100ms\n  state_file: %q\n",
		filepath.Join(t.TempDir(), "coop.json"))
	_, sock := startDaemon(t, p.A, pol)
	coopDoc := func() map[string]any {
		c, err := client.Dial(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		doc, err := c.Component("coop")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if why, _ := coopDoc()["waiting"].(string); !strings.Contains(why, "7431") {
		t.Fatalf("coop while the port is held: %v, want it waiting and saying why", coopDoc())
	}
	if line := status(t, sock).Components["coop"]; !strings.Contains(line, "WAITING") || !strings.Contains(line, "held by another process") {
		t.Errorf("status line of a waiting coop: %q", line)
	}
	time.Sleep(3 * time.Second) // a few retries fail
	unix.Close(squat)
	squat = -1
	freed := time.Now()
	bound := testutil.Patience(35 * time.Second) // the backoff reaches at most 30 s
	for {
		m := coopDoc()
		if _, waiting := m["waiting"]; !waiting {
			if _, failed := m["failed"]; failed {
				t.Fatalf("coop failed once the port was free: %v", m)
			}
			t.Logf("coop started %v after the port was freed", time.Since(freed).Round(time.Millisecond))
			return
		}
		if time.Since(freed) > bound {
			t.Fatalf("coop still waiting %v after the port was freed: %v", bound, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
