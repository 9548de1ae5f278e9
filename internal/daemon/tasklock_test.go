// tasklock_test.go: status beside the task engine's moves.
package daemon_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestStatusBesideRuleMoves: a process rule's move (the engine's lock,
// then the daemon's kernel lock) beside status (the kernel lock, then the
// engine's status) deadlocked the daemon: an API call timed out in a
// clean-clone run and every later one hung. Status reads the engine
// outside the kernel lock now; here processes matching an exe rule start
// without pause while status is asked for without pause, and every status
// must come.
func TestStatusBesideRuleMoves(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	exe := filepath.Join(t.TempDir(), "lanes-statusrule")
	copyFile(t, "/bin/true", exe)
	_, sock := startDaemon(t, p.A, devicePolicy(p.LinkA)+"rules:\n  - {name: statusrule, lane: background, exe: "+exe+"}\n")
	stop, asked := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { asked <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := client.Dial(sock)
			if err != nil {
				t.Errorf("status %d: %v", n, err)
				return
			}
			_, err = c.Status()
			c.Close()
			if err != nil {
				t.Errorf("status %d beside the rule's moves: %v", n, err)
				return
			}
			n++
		}
	}()
	started := 0
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); started++ {
		_ = p.A.Command(exe).Run()
	}
	close(stop)
	t.Logf("%d processes of the rule started, %d status calls answered", started, <-asked)
}
