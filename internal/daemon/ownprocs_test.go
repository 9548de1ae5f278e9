// ownprocs_test.go: only root moves the daemon or lanes-rtd (N17), end to
// end.
package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/procstat"
)

// TestMemberCannotMoveLanesProcesses (audit N17): an access-group member with no grant
// ran `lanes move --lane background <lanes-rtd's pid>`: lanes-rtd became
// SCHED_OTHER nice 19 and root's realtime sends' p99 went from 112 µs to
// 13.8 ms. Fix: only root moves the daemon or a process it started.
func TestMemberCannotMoveLanesProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	rtSock := filepath.Join(t.TempDir(), "rt.sock")
	b := newAttackBed(t, fmt.Sprintf("access:\n  group: users\nrealtime:\n  enabled: true\n  socket: %s\n  rate: 100mbit\n", rtSock))
	daemonPID := b.d.cmd.Process.Pid
	rtd := 0
	waitLong(t, "lanes-rtd", func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if st, err := procstat.Read(pid); err == nil && st.PPID == daemonPID && strings.HasPrefix(st.Comm, "lanes-rtd") {
				rtd = pid
			}
		}
		return rtd != 0
	})
	member := b.client(t, 61000, []uint32{100})
	for _, pid := range []int{rtd, daemonPID} {
		for _, l := range []lane.Lane{lane.Background, lane.Interactive} {
			if _, err := member.Move(pid, l, true); err == nil || !strings.Contains(err.Error(), "lanes' own") {
				t.Errorf("a member's move of pid %d (lanes-rtd %d, daemon %d) to %s: %v, want refused", pid, rtd, daemonPID, l, err)
			}
		}
	}
}
