// appstate_test.go: the states read from real cgroup v1 groups
// (testutil.NewAndroidGroups) with processes of app and system uids, and
// the watcher woken by the writes that move them, only by them.
package appstate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/appstate"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestIsApp(t *testing.T) {
	for uid, want := range map[uint32]bool{0: false, 1000: false, 9999: false, 10000: true, 10123: true,
		101000: false, 110123: true, 99000: true} {
		if appstate.IsApp(uid) != want {
			t.Errorf("IsApp(%d) = %v, want %v", uid, !want, want)
		}
	}
}

func TestParseState(t *testing.T) {
	for _, n := range []string{"top-app", "foreground", "background"} {
		if s, err := appstate.ParseState(n); err != nil || s.String() != n {
			t.Errorf("ParseState(%q) = %v, %v", n, s, err)
		}
	}
	if _, err := appstate.ParseState("none"); err == nil {
		t.Error("ParseState(none) accepted")
	}
}

// sleeper starts a process of uid that lives until the test ends.
func sleeper(t *testing.T, uid uint32) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func move(t *testing.T, g *testutil.AndroidGroups, pid int, group string) {
	t.Helper()
	if err := g.Move(pid, group); err != nil {
		t.Fatal(err)
	}
}

func TestStatesPerUID(t *testing.T) {
	g := testutil.NewAndroidGroups(t)
	t.Logf("hierarchy: %s", g.Kind)
	r := appstate.Reader{Root: g.Root, Proc: "/proc"}
	const app, system = 10123, 1000
	a1, a2, s1 := sleeper(t, app), sleeper(t, app), sleeper(t, system)
	steps := []struct {
		moves         map[int]string
		app, sysState appstate.State
	}{
		{map[int]string{a1: "top-app", a2: "foreground", s1: "system-background"}, appstate.TopApp, appstate.Background},
		{map[int]string{a1: "background"}, appstate.Foreground, appstate.Background},
		{map[int]string{a2: "restricted"}, appstate.Background, appstate.Background},
		{map[int]string{a2: "top-app"}, appstate.TopApp, appstate.Background},
		{map[int]string{a1: "", a2: "", s1: ""}, appstate.None, appstate.None},
	}
	for i, st := range steps {
		for pid, grp := range st.moves {
			move(t, g, pid, grp)
		}
		got, err := r.States()
		if err != nil {
			t.Fatal(err)
		}
		if got[app] != st.app || got[system] != st.sysState {
			t.Errorf("step %d: app %v, system %v; want %v, %v", i, got[app], got[system], st.app, st.sysState)
		}
	}
}

func TestStatesWithoutGroups(t *testing.T) {
	_, err := appstate.Reader{Root: t.TempDir(), Proc: "/proc"}.States()
	if !errors.Is(err, appstate.ErrNoGroups) {
		t.Errorf("States of an empty folder: %v, want ErrNoGroups", err)
	}
	if _, err := appstate.Watch(t.TempDir()); !errors.Is(err, appstate.ErrNoGroups) {
		t.Errorf("Watch of an empty folder: %v, want ErrNoGroups", err)
	}
}

// TestWatcherWakesOnMoves: a move wakes the watcher; without one it
// sleeps (a wait with nothing written ends only by its context).
func TestWatcherWakesOnMoves(t *testing.T) {
	g := testutil.NewAndroidGroups(t)
	w, err := appstate.Watch(g.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pid := sleeper(t, 10123)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := w.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with nothing moved: %v, want the context's deadline", err)
	}
	for _, grp := range []string{"top-app", "background", "restricted", "foreground", ""} {
		done := make(chan error, 1)
		wait := testutil.Patience(10 * time.Second)
		if grp == "" {
			wait = 300 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		go func() { done <- w.Wait(ctx) }()
		time.Sleep(10 * time.Millisecond) // the wait is blocked, or the event is queued for it: the same
		move(t, g, pid, grp)
		err := <-done
		cancel()
		if grp == "" {
			// the root is not a watched group: only its own deadline ends it
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a move to the root woke the watcher: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("move into %s: %v", grp, err)
		}
	}
}

// TestWatcherCost logs the CPU one move costs the watcher (a wake-up and
// a read of every group), for the figure at one move a second.
func TestWatcherCost(t *testing.T) {
	if testing.Short() {
		t.Skip("figure")
	}
	g := testutil.NewAndroidGroups(t)
	w, err := appstate.Watch(g.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := appstate.Reader{Root: g.Root, Proc: "/proc"}
	pids := []int{sleeper(t, 10123), sleeper(t, 10124), sleeper(t, 1000)}
	const moves = 200
	groups := []string{"top-app", "background"}
	// one move at a time, each answered by its wake-up: moves that come
	// faster than the watcher reads are one wake-up, as on a busy machine
	woken := make(chan time.Duration, moves)
	go func() {
		runtime.LockOSThread() // threadCPU is this thread's
		defer runtime.UnlockOSThread()
		defer close(woken)
		for {
			c0 := threadCPU()
			if w.Wait(context.Background()) != nil {
				return
			}
			if _, err := r.States(); err != nil {
				return
			}
			woken <- threadCPU() - c0
		}
	}()
	var cpu time.Duration
	for i := 0; i < moves; i++ {
		move(t, g, pids[i%len(pids)], groups[i%2])
		select {
		case c, ok := <-woken:
			if !ok {
				t.Fatalf("the watcher stopped after %d moves", i)
			}
			cpu += c
		case <-time.After(testutil.Patience(10 * time.Second)):
			t.Fatalf("move %d woke no watcher", i)
		}
	}
	per := cpu / moves
	t.Logf("watcher CPU per move: %v (%d moves, %d processes in the groups): %.4f%% of a core at 1 move/s",
		per, moves, len(pids), 100*per.Seconds())
}

// TestWatcherRun runs the watcher on a thread of its own, idle and then
// at one move a second, and logs that thread's wake-ups while nothing
// moves and its CPU share while moves come: the figure over 10
// minutes with LANES_APPSTATE_RUN=10m, 10 s by default.
func TestWatcherRun(t *testing.T) {
	if testing.Short() {
		t.Skip("figure")
	}
	run := 10 * time.Second
	if v := os.Getenv("LANES_APPSTATE_RUN"); v != "" {
		var err error
		if run, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	g := testutil.NewAndroidGroups(t)
	w, err := appstate.Watch(g.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := appstate.Reader{Root: g.Root, Proc: "/proc"}
	pids := []int{sleeper(t, 10123), sleeper(t, 10124), sleeper(t, 1000)}
	type sample struct {
		cpu      time.Duration
		switches int
	}
	tid := make(chan int)
	samples := make(chan sample, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		runtime.LockOSThread()
		tid <- unix.Gettid()
		for w.Wait(ctx) == nil {
			if _, err := r.States(); err != nil {
				break
			}
		}
		samples <- sample{}
	}()
	id := <-tid
	// the goroutine runs on into its first wait after sending its id:
	// that sleep is its own, not a wake-up
	for st := ""; st != "S"; time.Sleep(10 * time.Millisecond) {
		st = threadState(t, id)
	}
	time.Sleep(100 * time.Millisecond)
	read := func() sample { return sample{threadCPUOf(t, id), switchesOf(t, id)} }
	idle := run / 10
	s0 := read()
	time.Sleep(idle)
	s1 := read()
	moves := int(run / time.Second)
	t0 := time.Now()
	for i := 0; i < moves; i++ {
		move(t, g, pids[i%len(pids)], []string{"top-app", "background"}[i%2])
		time.Sleep(time.Second)
	}
	s2 := read()
	elapsed := time.Since(t0)
	t.Logf("watcher thread, nothing moving for %v: %d wake-ups (%.3f/s), %v CPU", idle, s1.switches-s0.switches,
		float64(s1.switches-s0.switches)/idle.Seconds(), s1.cpu-s0.cpu)
	t.Logf("watcher thread, %d moves at 1/s over %v: %v CPU, %.4f%% of a core, %d wake-ups",
		moves, elapsed.Round(time.Second), s2.cpu-s1.cpu, 100*(s2.cpu-s1.cpu).Seconds()/elapsed.Seconds(), s2.switches-s1.switches)
	if s1.switches != s0.switches {
		t.Errorf("the watcher's thread woke %d times while nothing moved", s1.switches-s0.switches)
	}
}

// threadCPUOf is a thread's CPU time (schedstat: nanoseconds on a CPU).
func threadCPUOf(t *testing.T, tid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	return time.Duration(ns)
}

// threadState is a thread's state letter (R running, S sleeping...).
func threadState(t *testing.T, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))[0]
}

// switchesOf is a thread's voluntary context switches: its wake-ups.
func switchesOf(t *testing.T, tid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// TestStatesReadEachProcessOnce: a group's processes are read from its
// `cgroup.procs` (one id per process with a thread in the group, cgroup
// v1), so a process's status is read once, not once per thread (an app
// has tens of threads). Here the groups and /proc are plain files: the
// threads 101 and 102 of process 100 carry a uid of their own, which a
// read of `tasks` would report.
func TestStatesReadEachProcessOnce(t *testing.T) {
	root, proc := t.TempDir(), t.TempDir()
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "top-app", "tasks"), "100\n101\n102\n")
	write(filepath.Join(root, "top-app", "cgroup.procs"), "100\n")
	for id, uid := range map[int]int{100: 10123, 101: 10999, 102: 10999} {
		write(filepath.Join(proc, strconv.Itoa(id), "status"),
			fmt.Sprintf("Name:\tapp\nTgid:\t100\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", id, uid, uid, uid, uid))
	}
	got, err := appstate.Reader{Root: root, Proc: proc}.States()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[10123] != appstate.TopApp {
		t.Errorf("states %v, want only uid 10123 top-app (its process, read once)", got)
	}
}

// TestStatesThreadMovedAlone: one thread of a process written into a
// group's `tasks` (task_profiles.json's profiles for a task) puts its
// process in that group's `cgroup.procs` too, so the uid takes that
// group's state. The thread is one of this test's, uid 0.
func TestStatesThreadMovedAlone(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // after the groups' removal moved the thread out
	g := testutil.NewAndroidGroups(t)
	tid := make(chan int)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine: never reused
		tid <- unix.Gettid()
		<-release
	}()
	id := <-tid
	if err := os.WriteFile(filepath.Join(g.Root, "top-app", "tasks"), []byte(strconv.Itoa(id)), 0); err != nil {
		t.Fatal(err)
	}
	got, err := appstate.Reader{Root: g.Root, Proc: "/proc"}.States()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != appstate.TopApp {
		t.Errorf("uid 0 with one thread in top-app: %v, want top-app (states %v)", got[0], got)
	}
}
