// Pure tests of the task policy: rule matching tables, bad rules refused with
// the field that is wrong, proc-connector message decoding, preempt parsing.
package sched

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"gopkg.in/yaml.v3"
)

func uid(v uint32) *config.UID { u := config.UID(v); return &u }
func iptr(v int) *int          { return &v }

func TestRuleMatching(t *testing.T) {
	player := &ProcInfo{PID: 100, PPID: 1, UID: 1000, Comm: "mpv", Exe: "/usr/bin/mpv",
		Cmdline: "mpv --audio-device=alsa song.flac", Cgroups: []string{"/user.slice/user-1000.slice/app.scope", "/"}, ParentComm: "systemd"}
	rsync := &ProcInfo{PID: 200, PPID: 150, UID: 0, Comm: "rsync", Exe: "/usr/bin/rsync",
		Cmdline: "rsync -a /data backup:/", Cgroups: []string{"/system.slice/backup.service"}, ParentComm: "backup.sh"}
	kthread := &ProcInfo{PID: 2, Comm: "kthreadd"}
	cases := []struct {
		name string
		rule config.TaskRule
		p    *ProcInfo
		want bool
	}{
		{"exe abs", config.TaskRule{Exe: "/usr/bin/mpv"}, player, true},
		{"exe abs other", config.TaskRule{Exe: "/usr/local/bin/mpv"}, player, false},
		{"exe base", config.TaskRule{Exe: "mpv"}, player, true},
		{"exe glob", config.TaskRule{Exe: "/usr/bin/m*"}, player, true},
		{"exe kernel thread", config.TaskRule{Exe: "*"}, kthread, false},
		{"comm", config.TaskRule{Comm: "rsync"}, rsync, true},
		{"comm glob", config.TaskRule{Comm: "rs?nc"}, rsync, true},
		{"comm miss", config.TaskRule{Comm: "mpv"}, rsync, false},
		{"cmdline regex", config.TaskRule{Cmdline: `--audio-device=\w+`}, player, true},
		{"cmdline anchored miss", config.TaskRule{Cmdline: `^rsync .*--delete`}, rsync, false},
		{"uid", config.TaskRule{UID: uid(1000)}, player, true},
		{"uid 0 miss", config.TaskRule{UID: uid(0)}, player, false},
		{"uid 0", config.TaskRule{UID: uid(0)}, rsync, true},
		{"cgroup prefix", config.TaskRule{Cgroup: "/system.slice"}, rsync, true},
		{"cgroup exact", config.TaskRule{Cgroup: "/system.slice/backup.service"}, rsync, true},
		{"cgroup not component", config.TaskRule{Cgroup: "/system.sl"}, rsync, false},
		{"cgroup v1 line", config.TaskRule{Cgroup: "/"}, player, true},
		{"parent", config.TaskRule{Parent: "backup.*"}, rsync, true},
		{"parent miss", config.TaskRule{Parent: "cron"}, rsync, false},
		{"all of", config.TaskRule{Comm: "mpv", UID: uid(1000), Cgroup: "/user.slice"}, player, true},
		{"all of, one fails", config.TaskRule{Comm: "mpv", UID: uid(0)}, player, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := Compile([]config.TaskRule{c.rule}, config.DefaultTaskSafety())
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			_, idx := rs.Match(c.p)
			if got := idx == 0; got != c.want {
				t.Errorf("match = %v, want %v", got, c.want)
			}
		})
	}
}

func TestFirstRuleWins(t *testing.T) {
	rs, err := Compile([]config.TaskRule{
		{Name: "audio", Comm: "mpv", Policy: "fifo", Priority: 20},
		{Name: "user", UID: uid(1000), Policy: "other", Nice: iptr(5)},
	}, config.DefaultTaskSafety())
	if err != nil {
		t.Fatal(err)
	}
	r, idx := rs.Match(&ProcInfo{Comm: "mpv", UID: 1000})
	if idx != 0 || r.Name != "audio" {
		t.Errorf("got %q (%d), want audio", r.Name, idx)
	}
	r, idx = rs.Match(&ProcInfo{Comm: "vim", UID: 1000})
	if idx != 1 || r.Name != "user" {
		t.Errorf("got %q (%d), want user", r.Name, idx)
	}
}

func TestBadRulesRefused(t *testing.T) {
	cases := []struct {
		yaml  string
		field string
		msg   string
	}{
		{"tasks: [{policy: fifo, priority: 10}]", "tasks[0]", "matches nothing"},
		{"tasks: [{comm: a, policy: fifo, priority: 70}]", "tasks[0].priority", "1..50"},
		{"task_safety: {max_rt_priority: 20}\ntasks: [{comm: a, policy: rr, priority: 30}]", "tasks[0].priority", "1..20"},
		{"tasks: [{comm: a, policy: fifo}]", "tasks[0].priority", "out of range"},
		{"tasks: [{comm: a, policy: deadline}]", "tasks[0].policy", "unknown policy"},
		{"tasks: [{comm: a}, {cmdline: 'a(b'}]", "tasks[1].cmdline", "regular expression"},
		{"tasks: [{comm: '[a'}]", "tasks[0].comm", "bad glob"},
		{"tasks: [{comm: averyveryverylongname}]", "tasks[0].comm", "15 characters"},
		{"tasks: [{exe: bin/foo}]", "tasks[0].exe", "absolute"},
		{"tasks: [{comm: a, nice: 30}]", "tasks[0].nice", "-20..19"},
		{"tasks: [{comm: a, policy: fifo, priority: 5, nice: 1}]", "tasks[0].nice", "no effect"},
		{"tasks: [{comm: a, policy: other, priority: 5}]", "tasks[0].priority", "only for fifo/rr"},
		{"tasks: [{name: x, comm: a, policy: fifo, priority: 5, cpu_idle: true}]", "tasks[0].policy", "normal tasks"},
		{"tasks: [{comm: a, cpu_weight: 100}]", "tasks[0].name", "needs a name"},
		{"tasks: [{name: 'a/b', comm: a, cpu_weight: 100}]", "tasks[0].name", "letters"},
		{"tasks: [{name: g, comm: a, cpu_weight: 20000}]", "tasks[0].cpu_weight", "1..10000"},
		{"tasks: [{comm: a, cpus: [-1]}]", "tasks[0].cpus[0]", "out of range"},
		{"tasks: [{comm: a, reset_on_fork: false}]", "tasks[0].reset_on_fork", "fifo/rr"},
		{"tasks: [{cgroup: system.slice}]", "tasks[0].cgroup", "starting with /"},
		{"tasks: [{name: a, comm: a}, {name: a, comm: b}]", "tasks[1].name", "duplicate"},
		{"task_safety: {max_rt_priority: 99}", "task_safety.max_rt_priority", "watchdog"},
		{"task_safety: {rttime: 10us}", "task_safety.rttime", "out of range"},
		{"task_safety: {watchdog: {interval: 1s, starve: 1s}}", "task_safety.watchdog.starve", "twice"},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			var cfg config.TaskSections
			if err := yaml.Unmarshal([]byte(c.yaml), &cfg); err != nil {
				t.Fatalf("yaml: %v", err)
			}
			err := cfg.Validate()
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: got %v, want a FieldError", c.yaml, err)
			}
			if fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s:\n got  %q (field %q)\n want field %q containing %q", c.yaml, err, fe.Field, c.field, c.msg)
			}
		})
	}
}

func TestGoodConfig(t *testing.T) {
	in := `
tasks:
  - name: audio
    comm: pipewire
    policy: fifo
    priority: 20
    cpus: [1]
    lane: realtime
  - name: backup
    exe: /usr/bin/rsync
    policy: idle
    cpu_idle: true
    lane: background
  - name: build
    cmdline: '^make( |$)'
    nice: 10
    cpu_weight: 50
task_safety:
  max_rt_priority: 40
  rttime: 500ms
  watchdog: {starve: 2s}
`
	var cfg config.TaskSections
	if err := yaml.Unmarshal([]byte(in), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if cfg.Tasks[0].Lane != lane.Realtime || cfg.Tasks[1].Lane != lane.Background {
		t.Errorf("lanes: %v %v", cfg.Tasks[0].Lane, cfg.Tasks[1].Lane)
	}
	s := cfg.Safety.WithDefaults()
	if s.Watchdog.Interval.D().Milliseconds() != 50 || !*s.Watchdog.Enabled || s.RTTime.D().Milliseconds() != 500 {
		t.Errorf("defaults: %+v", s)
	}
	if err := config.DefaultTaskSections().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}

func TestParseEvents(t *testing.T) {
	msg := func(what uint32, ts uint64, u ...uint32) []byte {
		body := make([]byte, cnMsgLen+evHeaderLen+24)
		binary.NativeEndian.PutUint32(body[0:], cnIdxProc)
		binary.NativeEndian.PutUint32(body[4:], cnValProc)
		ev := body[cnMsgLen:]
		binary.NativeEndian.PutUint32(ev[0:], what)
		binary.NativeEndian.PutUint64(ev[8:], ts)
		for i, v := range u {
			binary.NativeEndian.PutUint32(ev[evHeaderLen+4*i:], v)
		}
		b := make([]byte, nlHdrLen, nlHdrLen+len(body))
		binary.NativeEndian.PutUint32(b[0:], uint32(nlHdrLen+len(body)))
		return append(b, body...)
	}
	comm := msg(procEventComm, 7, 42, 42)
	copy(comm[nlHdrLen+cnMsgLen+evHeaderLen+8:], "worker\x00")
	var b []byte
	b = append(b, msg(procEventFork, 5, 10, 10, 11, 11)...)
	b = append(b, msg(procEventExec, 6, 11, 11)...)
	b = append(b, comm...)
	b = append(b, msg(procEventExit, 8, 11, 11)...)
	b = append(b, msg(0x4, 9, 1, 1)...) // uid change: ignored
	evs, err := ParseEvents(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fork 10/10 -> 11/11", "exec 11/11", `comm 42/42 "worker"`, "exit 11/11"}
	if len(evs) != len(want) {
		t.Fatalf("got %v", evs)
	}
	for i, e := range evs {
		if e.String() != want[i] {
			t.Errorf("event %d: %s, want %s", i, e, want[i])
		}
	}
	if evs[1].TimeNS != 6 {
		t.Errorf("timestamp %d", evs[1].TimeNS)
	}
	if _, err := ParseEvents([]byte{200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil); err == nil {
		t.Error("truncated message accepted")
	}
}

func TestParsePreemptModes(t *testing.T) {
	modes, cur := ParsePreemptModes("none voluntary (full) lazy\n")
	if cur != "full" || len(modes) != 4 || modes[2] != "full" {
		t.Errorf("modes %v cur %q", modes, cur)
	}
	if _, cur := ParsePreemptModes("none voluntary full"); cur != "" {
		t.Errorf("cur %q without parentheses", cur)
	}
	// 7.0+ on an architecture with lazy preemption (x86-64, arm64): only
	// full and lazy, each followed by a space (kernel/sched/debug.c).
	modes, cur = ParsePreemptModes("full (lazy) \n")
	if cur != "lazy" || strings.Join(modes, " ") != "full lazy" {
		t.Errorf("7.x: modes %q cur %q", modes, cur)
	}
}

func TestCheckPolicyPath(t *testing.T) {
	if err := CheckPolicyPath("/etc/hostname"); err != nil && !strings.Contains(err.Error(), "no such") {
		t.Errorf("/etc/hostname: %v", err)
	}
	dir := t.TempDir() // root's 0700, under sticky /tmp: others cannot change it
	if os.Geteuid() == 0 {
		if err := CheckPolicyPath(dir); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
	if err := os.Chmod(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := CheckPolicyPath(dir); err == nil {
		t.Errorf("group-writable %s accepted", dir)
	}
}

// TestInlineInPolicy: the policy embeds Config inline; strict decoding must
// see tasks: and task_safety: as its own keys.
func TestInlineInPolicy(t *testing.T) {
	var pol struct {
		Interfaces          []any `yaml:"interfaces"`
		config.TaskSections `yaml:",inline"`
	}
	dec := yaml.NewDecoder(strings.NewReader("interfaces: []\ntasks: [{comm: a, nice: 1}]\ntask_safety: {rttime: 1s}\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&pol); err != nil {
		t.Fatal(err)
	}
	if len(pol.Tasks) != 1 || pol.Safety.RTTime.D().Seconds() != 1 {
		t.Errorf("decoded %+v", pol.TaskSections)
	}
	if err := pol.Validate(); err != nil {
		t.Error(err)
	}
}

func TestKernelRT(t *testing.T) {
	k := ReadKernelRT()
	t.Logf("%+v", k)
	if k.Release == "" || k.PreemptModel == "" {
		t.Errorf("incomplete: %+v", k)
	}
	if k.HZ != 0 && (k.HZ < 24 || k.HZ > 10000) {
		t.Errorf("HZ %d implausible", k.HZ)
	}
	if hz := measureHZ(); hz != 0 && k.HZSource == "config" && (hz < k.HZ*7/10 || hz > k.HZ*13/10) {
		// tickless idle does not stop jiffies from advancing
		t.Errorf("measured HZ %d, config says %d", hz, k.HZ)
	}
}

// TestLaneFromLaterRule: the CPU treatment and the lane each come from the
// first matching rule that has one (the daemon appends lane-only rules after
// the task rules).
func TestLaneFromLaterRule(t *testing.T) {
	rs, err := Compile([]config.TaskRule{
		{Name: "audio", Comm: "mpv", Policy: "fifo", Priority: 10},
		{Name: "lane.media", Comm: "mpv", Lane: lane.Realtime},
		{Name: "lane.bulk", UID: uid(1000), Lane: lane.Background},
		{Name: "bulk-cpu", UID: uid(1000), Nice: iptr(10)},
	}, config.DefaultTaskSafety())
	if err != nil {
		t.Fatal(err)
	}
	r, idx := rs.Match(&ProcInfo{Comm: "mpv", UID: 1000})
	if idx != 0 || r.Policy != "fifo" || r.Lane != lane.Realtime {
		t.Errorf("mpv: %+v (%d), want fifo + realtime", r, idx)
	}
	r, idx = rs.Match(&ProcInfo{Comm: "rsync", UID: 1000})
	if idx != 2 || r.Nice == nil || *r.Nice != 10 || r.Lane != lane.Background {
		t.Errorf("rsync: %+v (%d), want nice 10 + background", r, idx)
	}
	if _, idx := rs.Match(&ProcInfo{Comm: "vim", UID: 0}); idx != -1 {
		t.Errorf("vim matched rule %d", idx)
	}
}
