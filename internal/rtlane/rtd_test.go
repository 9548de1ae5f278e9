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
	"reflect"
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

// ctlStructs lists rtd/ctl.h's structs beside their Go copies, field by
// field in order (the Go structs are encoded packed with encoding/binary).
var ctlStructs = []struct {
	c      string
	fields []string
	v      any
}{
	{"rtd_hdr", []string{"type", "conn"}, rtdHdr{}},
	{"rtd_config", []string{"h", "rate_bps", "netns_cookie", "overhead", "backlog", "reserve", "max_queue", "flags",
		"class_prio", "plain_prio", "queue_bytes", "requests", "pad"}, rtdConfigMsg{}},
	{"rtd_conn", []string{"h", "uid", "pad"}, rtdConnMsg{}},
	{"rtd_route", []string{"h", "family", "cls", "pad", "addr"}, rtdRouteMsg{}},
	{"rtd_forward", []string{"h", "uid", "len"}, rtdForwardMsg{}},
	{"rtd_flow", []string{"uid", "flow", "admitted", "rejected", "sent", "sent_bytes", "dropped_late", "send_errors",
		"min_margin_ns", "rejects"}, rtdFlow{}},
	{"rtd_counters", []string{"h", "nflows", "more", "depth", "conns", "queued_ns", "rate_bps", "app_socks",
		"lost_notices", "lost_events", "allocs", "pool_bytes", "pool_free", "send_full", "totals"}, rtdCountersMsg{}},
	{"rtd_event", []string{"kind", "reason", "pad", "uid", "flow", "seq", "time", "deadline", "tx"}, rtdEvent{}},
}

// runC compiles a C program with rtd/ and include/ on the include path
// and returns its output.
func runC(t *testing.T, prog string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.c"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	inc := filepath.Join(rtdbuild.RtdDir(), "..", "include")
	if b, err := exec.Command(rtdbuild.CC(), "-Wall", "-Werror", "-I"+rtdbuild.RtdDir(), "-I"+inc, "-o", bin, filepath.Join(dir, "prog.c")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	b, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestControlLayout compares the Go structs of the control protocol with
// rtd/ctl.h's, compiled, field by field: every field's offset and size as
// encoding/binary writes it, against offsetof and sizeof in C, and each
// struct's size.
func TestControlLayout(t *testing.T) {
	var prog strings.Builder
	prog.WriteString("#include <stddef.h>\n#include <stdio.h>\n#include \"ctl.h\"\nint main(void) {\n")
	for _, s := range ctlStructs {
		fmt.Fprintf(&prog, "\tprintf(\"%s %%zu\\n\", sizeof(struct %s));\n", s.c, s.c)
		for _, f := range s.fields {
			fmt.Fprintf(&prog, "\tprintf(\"%s.%s %%zu %%zu\\n\", offsetof(struct %s, %s), sizeof(((struct %s *)0)->%s));\n",
				s.c, f, s.c, f, s.c, f)
		}
	}
	prog.WriteString("\treturn 0;\n}\n")
	got := strings.Split(strings.TrimSpace(runC(t, prog.String())), "\n")
	var want []string
	for _, s := range ctlStructs {
		want = append(want, fmt.Sprintf("%s %d", s.c, binary.Size(s.v)))
		rv := reflect.ValueOf(s.v)
		if rv.NumField() != len(s.fields) {
			t.Errorf("struct %s: %d fields in C, %d in Go (%T)", s.c, len(s.fields), rv.NumField(), s.v)
			continue
		}
		off := 0
		for i, f := range s.fields {
			size := binary.Size(rv.Field(i).Interface())
			want = append(want, fmt.Sprintf("%s.%s %d %d", s.c, f, off, size))
			off += size
		}
	}
	if len(got) != len(want) {
		t.Fatalf("C printed %d lines, Go has %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("C %q, Go (%s) %q", got[i], goField(got[i]), want[i])
		}
	}
}

// goField names the Go field of a "struct.field ..." line.
func goField(line string) string {
	name, _, _ := strings.Cut(line, " ")
	sn, fn, ok := strings.Cut(name, ".")
	for _, s := range ctlStructs {
		if s.c == sn && ok {
			for i, f := range s.fields {
				if f == fn {
					return fmt.Sprintf("%T.%s", s.v, reflect.TypeOf(s.v).Field(i).Name)
				}
			}
		}
	}
	return name
}

// TestWireMatchesHeader: the client protocol has one definition,
// include/lanes_rt.h (lanes-rtd includes it); package wire is its Go copy,
// checked here constant by constant and reason name by reason name.
func TestWireMatchesHeader(t *testing.T) {
	consts := []struct {
		c    string
		want int64
	}{
		{"LANES_RT_VERSION", wire.Version}, {"LANES_RT_REQ_SIZE", wire.RequestSize},
		{"LANES_RT_REPLY_SIZE", wire.ReplySize}, {"LANES_RT_MAX_PAYLOAD", wire.MaxPayload},
		{"LANES_RT_MAX_REPLY", wire.MaxReply}, {"LANES_RT_MAX_SOCKS", wire.MaxSocks},
		{"LANES_RT_SEND", wire.TypeSend}, {"LANES_RT_STATS", wire.TypeStats}, {"LANES_RT_ATTACH", wire.TypeAttach},
		{"LANES_RT_ADMIT", wire.TypeAdmit}, {"LANES_RT_REJECT", wire.TypeReject}, {"LANES_RT_DROPPED", wire.TypeDropped},
		{"LANES_RT_ERROR", wire.TypeError}, {"LANES_RT_STATS_OK", wire.TypeStatsOK}, {"LANES_RT_ATTACHED", wire.TypeAttached},
		{"LANES_RT_FLAG_RELATIVE", wire.FlagRelative}, {"LANES_RT_HORIZON_NS", wire.DeadlineHorizon},
		{"LANES_RT_REASON_OVER_SHARE", wire.ReasonOverShare},
	}
	var prog strings.Builder
	prog.WriteString("#include <stdio.h>\n#include \"lanes_rt.h\"\nint main(void) {\n\tint r;\n")
	for _, c := range consts {
		fmt.Fprintf(&prog, "\tprintf(\"%s %%lld\\n\", (long long)(%s));\n", c.c, c.c)
	}
	prog.WriteString("\tfor (r = 0; r <= LANES_RT_REASON_OVER_SHARE + 1; r++)\n\t\tprintf(\"reason %d %s\\n\", r, lanes_rt_reason_str((unsigned char)r));\n\treturn 0;\n}\n")
	got := strings.Split(strings.TrimSpace(runC(t, prog.String())), "\n")
	var want []string
	for _, c := range consts {
		want = append(want, fmt.Sprintf("%s %d", c.c, c.want))
	}
	for r := 0; r <= wire.ReasonOverShare+1; r++ {
		name := wire.ReasonString(uint8(r))
		if r == wire.ReasonOverShare+1 {
			name = "unknown" // the C client's name for a code it does not know
		}
		want = append(want, fmt.Sprintf("reason %d %s", r, name))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("include/lanes_rt.h:\n%s\npackage wire:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
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
	b.lane.own.mu.Lock()
	for uid := range uint32(64) {
		for f := range uint32(64) {
			b.lane.own.flow(flowKey{uid + 1000, f}).Rejects = map[string]uint64{"not-granted": 1}
		}
	}
	b.lane.own.mu.Unlock()
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
