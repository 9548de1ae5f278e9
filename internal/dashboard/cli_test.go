// cli_test.go: the dashboard as `lanes dashboard` runs it, the built
// binary with the client it passes, not a Server the test wires itself:
// a UDP flow of the daemon's namespace must be in its /api/snapshot.
package dashboard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// runLanesDashboard runs `lanes dashboard` of the daemon at sock, sampling
// ns, on a loopback port until the test ends; it returns the address.
func runLanesDashboard(t *testing.T, bin, sock string, ns *testutil.NetNS) string {
	cmd := exec.Command(bin, "dashboard", "--socket", sock, "--netns", ns.Path(),
		"--listen", "127.0.0.1:0", "--interval", "200ms")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n') // "lanes dashboard on http://ADDR/ ..."
	var addr string
	if _, serr := fmt.Sscanf(line, "lanes dashboard on http://%s", &addr); err != nil || serr != nil {
		t.Fatalf("lanes dashboard said %q: %v", line, err)
	}
	return strings.TrimSuffix(addr, "/")
}

// udpSnapshot is the UDP part of /api/snapshot.
type udpSnapshot struct {
	UDPFlows []struct {
		Src, Dst, Lane string
	} `json:"udp_flows"`
	UDPError string `json:"udp_error"`
}

func getUDPSnapshot(t *testing.T, addr string) udpSnapshot {
	resp, err := http.Get("http://" + addr + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s udpSnapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

// Issue: `lanes dashboard` beside a UDP flow said "the daemon does not list
// UDP flows": its reconnecting client lacked UDPFlows, while the tests gave
// the dashboard another client that had it.
func TestLanesDashboardListsUDPFlow(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("starts a daemon and the dashboard")
	}
	p := testutil.NewVethPair(t)
	sock := startLanesDaemon(t, p.A, p.LinkA)
	var conn net.Conn
	p.A.Do(t, func() (err error) { conn, err = net.Dial("udp4", fmt.Sprintf("%s:9", p.AddrB)); return })
	t.Cleanup(func() { conn.Close() })
	local := conn.LocalAddr().String()
	addr := runLanesDashboard(t, testutil.BuildLanes(t, "../.."), sock, p.A)
	var s udpSnapshot
	for deadline := time.Now().Add(testutil.Patience(20 * time.Second)); ; {
		s = getUDPSnapshot(t, addr)
		for _, f := range s.UDPFlows {
			if f.Src == local {
				t.Logf("lanes dashboard lists %s -> %s in %s", f.Src, f.Dst, f.Lane)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("lanes dashboard's snapshot lacks the UDP flow from %s: %d flows, udp_error %q",
				local, len(s.UDPFlows), s.UDPError)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
