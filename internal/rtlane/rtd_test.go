// rtd_test.go: the lane's tests run lanes-rtd built here from rtd/ with
// the system's C compiler, as make does; the control protocol's layout is
// checked against rtd/ctl.h.
package rtlane

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/procstat"
	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// testHelper is the lanes-rtd the tests' lanes run.
var testHelper string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lanes-rtd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if testHelper, err = rtdbuild.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building lanes-rtd for the tests:", err)
		return 1
	}
	return m.Run()
}

// helperPids are the lanes-rtd processes this process started.
func helperPids() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err == nil && strings.HasPrefix(st.Comm, HelperName) && st.PPID == os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// testOpts puts the tests' data path before opts.
func testOpts(opts ...Option) []Option { return append([]Option{WithHelper(testHelper)}, opts...) }

// TestControlLayout compares the Go structs of the control protocol with
// rtd/ctl.h's, compiled.
func TestControlLayout(t *testing.T) {
	prog := `#include <stdio.h>
#include "ctl.h"
int main(void) {
	printf("%zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct rtd_hdr), sizeof(struct rtd_config),
	       sizeof(struct rtd_conn), sizeof(struct rtd_route), sizeof(struct rtd_forward),
	       sizeof(struct rtd_flow), sizeof(struct rtd_counters), sizeof(struct rtd_event));
	return 0;
}`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "layout.c"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if b, err := exec.Command(rtdbuild.CC(), "-I"+rtdbuild.RtdDir(), "-o", bin, filepath.Join(dir, "layout.c")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	b, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sizes := []any{rtdHdr{}, rtdConfigMsg{}, rtdConnMsg{}, rtdRouteMsg{}, rtdForwardMsg{}, rtdFlow{}, rtdCountersMsg{}, rtdEvent{}}
	var want []string
	for _, v := range sizes {
		want = append(want, fmt.Sprint(binary.Size(v)))
	}
	if got := strings.TrimSpace(string(b)); got != strings.Join(want, " ") {
		t.Fatalf("sizes in C %s, in Go %s (hdr config conn route forward flow counters event)", got, strings.Join(want, " "))
	}
}

// TestStatsWaitDoesNotSpin: while the daemon answers a granted client's
// STATS, lanes-rtd does not read that connection; it must not watch it
// either (epoll is level-triggered: it would spin at real-time priority
// until the answer came, a core's worth of CPU). The lane's counters hold
// 4,096 flows, so that each answer takes the daemon a while (the JSON,
// trimmed to fit); 180 STATS requests, two at a time, and 10 followed at
// once by a hang-up: lanes-rtd's CPU time stays a small part of the wall time they
// took (a spin makes it most of it).
func TestStatsWaitDoesNotSpin(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	pid := b.lane.rtd.cmd.Process.Pid
	b.lane.mu.Lock()
	for uid := range uint32(64) {
		for f := range uint32(64) {
			b.lane.flow(flowKey{uid + 1000, f}).Rejects = map[string]uint64{"not-granted": 1}
		}
	}
	b.lane.mu.Unlock()
	c, err := dialAs(t, b.cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	cpu0, wall0 := processCPU(t, pid), time.Now()
	stats := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeStats})
	for i := 0; i < 100; i++ {
		if i%10 == 9 { // a client gone while its request is with the daemon
			h, err := dialAs(t, b.cfg.Socket, 0)
			if err != nil {
				t.Fatal(err)
			}
			_ = unix.Send(h.fd, stats, 0)
			_ = unix.Shutdown(h.fd, unix.SHUT_RDWR) // closed by dialAs's cleanup
			continue
		}
		// Two requests at once: the second waits, unread, while the
		// daemon answers the first.
		if err := unix.Send(c.fd, stats, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.stats(); err != nil {
			t.Fatal(err)
		}
		if rep, err := c.read(); err != nil || rep.Type != wire.TypeStatsOK {
			t.Fatalf("second reply: %#x %v", rep.Type, err)
		}
	}
	cpu, wall := processCPU(t, pid)-cpu0, time.Since(wall0)
	t.Logf("lanes-rtd's CPU %v over %v of STATS requests", cpu, wall)
	if cpu > wall/4 {
		t.Errorf("lanes-rtd used %v of CPU in %v: it spins while the daemon answers", cpu, wall)
	}
	if _, err := c.stats(); err != nil {
		t.Errorf("after the hang-ups: %v", err)
	}
}

// TestStopSignalsAreTheDaemons: systemd's stop sends SIGTERM to every
// process of the unit's cgroup, a terminal's Ctrl-C or hang-up SIGINT or
// SIGHUP to the process group. lanes-rtd lives on through them (the daemon
// ends it by closing the control socket, once it has stopped the lane),
// and still serves; the test's cleanup checks that it ends with the lane.
func TestStopSignalsAreTheDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	pid := b.lane.rtd.cmd.Process.Pid
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP} {
		if err := unix.Kill(pid, sig); err != nil {
			t.Fatalf("%v: %v (lanes-rtd ended on an earlier signal)", sig, err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a signal taken ends it in microseconds
	select {
	case err := <-b.lane.rtd.exit:
		b.lane.rtd.exit <- err
		t.Fatalf("lanes-rtd ended on the daemon's stop signals: %v", err)
	default:
	}
	c, err := dialAs(t, b.cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.stats(); err != nil {
		t.Errorf("after the signals: %v", err)
	}
	if got := helperPids(); len(got) != 1 || got[0] != pid {
		t.Errorf("lanes-rtd processes %v, want [%d]", got, pid)
	}
}

// processCPU is a process's user and system time.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.CPU()
}
