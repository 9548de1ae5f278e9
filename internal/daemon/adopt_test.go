// adopt_test.go: a daemon does not adopt a lane group a user made in a
// cgroup delegated to it (N13), end to end.
package daemon_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestUserOwnedLaneGroupNotAdopted (audit N13): a user whose cgroup is delegated to it
// made lanes.<instance>.realtime in it and kept its process there; at the
// daemon's next start it was adopted by name ("adopted lane groups of a
// previous run") and the user's traffic went realtime. Fix: only groups
// root owns with lanes' trusted.lanes mark are adopted.
func TestUserOwnedLaneGroupNotAdopted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if os.Getenv("LANES_CG_HELPER") != "" {
		t.Skip("helper")
	}
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mount")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	inst, _ := instanceIn(t, p.A)
	scopeRel := "/" + testutil.UniqueName("lanes-test-") + ".service"
	scope := makeScope(t, root, scopeRel)
	group := filepath.Join(scope, "lanes."+inst+".realtime")
	for _, dir := range []string{scope, group} {
		if dir == group {
			if err := os.Mkdir(group, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(dir, nobody, nobody); err != nil { // Delegate=, then the user's mkdir
			t.Fatal(err)
		}
	}
	_, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	waitLong(t, "the server on B", func() bool {
		var c net.Conn
		p.A.Do(t, func() error { c, _ = net.Dial("tcp", fmt.Sprintf("%s:8080", p.AddrB)); return nil })
		if c != nil {
			c.Close()
		}
		return c != nil
	})
	exe := copyTestBinary(t)
	helper := p.A.Command(exe, "-test.run=^TestCgroupHelper$")
	helper.Env = append(os.Environ(), fmt.Sprintf("LANES_CG_HELPER=%s:8080", p.AddrB))
	stdin, _ := helper.StdinPipe()
	stdout, _ := helper.StdoutPipe()
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { helper.Process.Kill(); helper.Wait() })
	if err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte(fmt.Sprint(helper.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "connect")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var cookie uint64
	if _, serr := fmt.Sscanf(line, "cookie=%d", &cookie); err != nil || serr != nil {
		t.Fatalf("helper: %q %v %v", line, err, serr)
	}
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.SocketLanes([]uint64{cookie}); err != nil || got[cookie] == lane.Realtime {
		t.Errorf("a connection from the user's own lanes.%s.realtime: lane %v (%v)", inst, got[cookie], err)
	}
}
