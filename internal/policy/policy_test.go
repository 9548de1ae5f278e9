// Tests of the policy loader: the default, a full valid file, and a table of
// broken files with the message each must give (file, line, field, reason).
package policy

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

func TestDefault(t *testing.T) {
	p := Default()
	if len(p.Interfaces) != 1 || p.Interfaces[0].Name != DefaultRouteInterface || p.Interfaces[0].Mode != DeviceBottleneck {
		t.Fatalf("default interfaces = %+v", p.Interfaces)
	}
	if !*p.DSCP.LowerEffortBackground || p.DSCP.ExpeditedRealtime {
		t.Fatalf("default dscp = %+v", p.DSCP)
	}
}

// TestDefaultListsRealtimeKeys: the default policy's realtime section
// (what --print-default-policy shows) names every key of the section and
// gives each its built-in default.
func TestDefaultListsRealtimeKeys(t *testing.T) {
	var doc struct {
		Realtime map[string]any `yaml:"realtime"`
	}
	if err := yaml.Unmarshal(DefaultYAML(), &doc); err != nil {
		t.Fatal(err)
	}
	ty := reflect.TypeOf(config.Realtime{})
	for i := 0; i < ty.NumField(); i++ {
		key := strings.Split(ty.Field(i).Tag.Get("yaml"), ",")[0]
		if _, ok := doc.Realtime[key]; !ok {
			t.Errorf("the default policy's realtime section lacks %q", key)
		}
	}
	got := Default().Realtime
	if len(got.Grants.UIDs)+len(got.Grants.GIDs) == 0 {
		got.Grants = config.RealtimeGrants{} // [] and nil alike
	}
	if !reflect.DeepEqual(got, config.DefaultRealtime()) {
		t.Errorf("default policy's realtime section = %+v, want the built-in %+v", got, config.DefaultRealtime())
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	p, err := Parse("empty.yaml", []byte("# nothing\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Interfaces) != 1 || p.Interfaces[0].Name != DefaultRouteInterface {
		t.Fatalf("got %+v", p.Interfaces)
	}
}

const full = `
interfaces:
  - name: eth0
    mode: shaped
    uplink: 10mbit
    background_floor: 500kbit
    device_queue: 1500B
  - name: wlan0
rules:
  - name: backups
    lane: background
    exe: /usr/bin/rsync
  - name: sensor-upload
    lane: background
    dst: 192.0.2.10
    dport: 443
    sport: 40000
  - lane: background
    uid: 1001
  - lane: realtime
    dscp: 46
access:
  group: users
dscp:
  ef_realtime: true
`

func TestFull(t *testing.T) {
	p, err := Parse("full.yaml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	eth := p.Interfaces[0]
	if eth.Mode != Shaped || eth.Uplink != 10_000_000 || eth.BackgroundFloor != 500_000 || eth.DeviceQueue != 1500 {
		t.Fatalf("eth0 = %+v", eth)
	}
	if p.Interfaces[1].Mode != DeviceBottleneck {
		t.Fatalf("wlan0 mode = %q", p.Interfaces[1].Mode)
	}
	if len(p.Rules) != 4 || p.Rules[1].Lane != lane.Background || p.Matches[1].Kind != MatchTuple || p.Matches[1].SPort != 40000 {
		t.Fatalf("rules = %+v", p.Rules)
	}
	if p.Matches[0].Kind != MatchProcess || p.Matches[2].Kind != MatchUID || p.Matches[3].Kind != MatchDSCP {
		t.Fatalf("rule kinds wrong: %+v", p.Matches)
	}
	if *p.Rules[2].UID != 1001 || *p.Rules[3].DSCP != 46 || p.Access.Group != "users" || !p.DSCP.ExpeditedRealtime {
		t.Fatalf("got %+v", p)
	}
}

func TestBrokenFiles(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		field, msg string
	}{
		{"syntax", "rules: []\nfoo: bar: baz\n", 2, "(syntax)", "mapping values are not allowed"},
		{"unknown top key", "interfaces: []\nrulez: []\n", 2, "rulez", "unknown field"},
		{"unknown nested key", "interfaces:\n  - name: eth0\n    speed: 10mbit\n", 3, "interfaces[0].speed", "unknown field (known here: name, mode"},
		{"bad rate", "interfaces:\n  - name: eth0\n    mode: shaped\n    uplink: fast\n", 4, "interfaces[0].uplink", `bad rate "fast"`},
		{"shaped without rate", "interfaces:\n  - name: eth0\n    mode: shaped\n", 2, "interfaces[0].uplink", "needs an uplink rate"},
		{"unknown mode", "interfaces:\n  - name: eth0\n    mode: turbo\n", 3, "interfaces[0].mode", `unknown mode "turbo"`},
		{"floor above rate", "interfaces:\n  - name: eth0\n    mode: shaped\n    uplink: 1mbit\n    background_floor: 2mbit\n", 5, "interfaces[0].background_floor", "must be below the uplink"},
		{"rate without shaped", "interfaces:\n  - name: eth0\n    uplink: 1mbit\n", 2, "interfaces[0].mode", "need mode: shaped"},
		{"long ifname", "interfaces:\n  - name: averyveryverylongname0\n", 2, "interfaces[0].name", "not a valid interface name"},
		{"dup interface", "interfaces:\n  - name: eth0\n  - name: eth0\n", 3, "interfaces[1].name", "listed twice"},
		{"bad lane", "rules:\n  - lane: fastest\n    uid: 3\n", 2, "rules[0].lane", `unknown lane "fastest"`},
		{"no lane", "rules:\n  - uid: 3\n", 2, "rules[0].lane", "missing"},
		{"matches nothing", "rules:\n  - name: x\n    lane: background\n", 2, "rules[0]", "matches nothing"},
		{"bad dst", "rules:\n  - lane: background\n    dst: 300.1.1.1\n", 3, "rules[0].dst", "not an address or prefix"},
		{"port without dst", "rules:\n  - lane: background\n    dport: 80\n", 2, "rules[0].dst", "needs dst"},
		{"port out of range", "rules:\n  - lane: background\n    dst: 10.0.0.1\n    dport: 70000\n", 4, "rules[0].dport", `"70000" is not a valid non-negative integer`},
		{"negative uid", "rules:\n  - lane: background\n    uid: -1\n", 3, "rules[0].uid", "not a valid non-negative integer"},
		{"dscp range", "rules:\n  - lane: background\n    dscp: 64\n", 3, "rules[0].dscp", "out of range"},
		{"mixed rule", "rules:\n  - lane: background\n    dst: 10.0.0.1\n    exe: /bin/x\n", 3, "rules[0].dst", "cannot also match a destination"},
		{"relative cgroup", "rules:\n  - lane: background\n    cgroup: user.slice\n", 3, "rules[0].cgroup", "absolute path"},
		{"dup rule name", "rules:\n  - {name: a, lane: background, uid: 1}\n  - {name: a, lane: background, uid: 2}\n", 3, "rules[1].name", "used twice"},
		{"list wanted", "rules: background\n", 1, "rules", "want a list"},
		{"mapping wanted", "interfaces:\n  - eth0\n", 2, "interfaces[0]", "want a mapping"},
		{"duplicate key", "access:\n  group: a\n  group: b\n", 3, "access.group", "given twice"},
		{"bad rule name", "rules:\n  - {name: 'my upload', lane: background, uid: 1}\n", 2, "rules[0].name", "letters, digits"},
		{"bad group", "access:\n  group: 'a b'\n", 2, "access.group", "not a valid group name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.text))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("want *policy.Error, got %v", err)
			}
			if pe.File != "bad.yaml" || pe.Line != tc.line || pe.Field != tc.field || !strings.Contains(pe.Msg, tc.msg) {
				t.Fatalf("got %q\nwant bad.yaml:%d: %s: ...%s...", pe.Error(), tc.line, tc.field, tc.msg)
			}
		})
	}
}

func TestLoadRootOwned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte("rules: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if _, err := Load(path, true); err != nil {
			t.Fatalf("root-owned file refused: %v", err)
		}
		// A group-writable file (root:users 0664) was accepted: only
		// world-writable ones were refused.
		if err := os.Chmod(path, 0o664); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, true); err == nil || !strings.Contains(err.Error(), "writable by group") {
			t.Fatalf("group-writable file: %v", err)
		}
		os.Chmod(path, 0o644)
		if err := os.Chown(path, 1234, 1234); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, true); err == nil || !strings.Contains(err.Error(), "owned by uid 1234") {
			t.Fatalf("foreign-owned file: %v", err)
		}
	}
	if _, err := Load(path, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), false); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestTaskSections(t *testing.T) {
	text := `
rules:
  - {name: sync, lane: background, exe: /usr/bin/rsync}
tasks:
  - name: player
    comm: player
    policy: fifo
    priority: 20
task_safety:
  max_rt_priority: 40
`
	p, err := Parse("tasks.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tasks) != 1 || p.Tasks[0].Priority != 20 || p.Safety.MaxRTPriority != 40 {
		t.Fatalf("tasks = %+v safety = %+v", p.Tasks, p.Safety)
	}
	lr := p.ProcessLaneRules()
	if len(lr) != 1 || lr[0].Exe != "/usr/bin/rsync" || lr[0].Lane != lane.Background || lr[0].Policy != "" {
		t.Fatalf("process lane rules = %+v", lr)
	}
	_, err = Parse("bad.yaml", []byte("tasks:\n  - name: x\n    comm: x\n    policy: fifo\n    priority: 90\n"))
	var pe *Error
	if !errors.As(err, &pe) || pe.Field != "tasks[0].priority" || pe.Line != 5 {
		t.Fatalf("over-limit priority: %v", err)
	}
}

func TestCoopAndRealtimeSections(t *testing.T) {
	p, err := Parse("c.yaml", []byte("coop:\n  enabled: true\n  ap_rate: 20mbit\nrealtime:\n  enabled: true\n  rate: 100mbit\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Coop.Enabled || p.Coop.APRate != 20_000_000 || p.Coop.Port == 0 || p.Coop.Interval.D() == 0 {
		t.Fatalf("coop = %+v (defaults must survive a partial section)", p.Coop)
	}
	if !p.Realtime.Enabled || p.Realtime.Rate != 100_000_000 || p.Realtime.Socket == "" {
		t.Fatalf("realtime = %+v", p.Realtime)
	}
	_, err = Parse("bad.yaml", []byte("coop:\n  enabled: true\n  interval: 1ms\n"))
	var pe *Error
	if !errors.As(err, &pe) || pe.Field != "coop.interval" || pe.Line != 3 {
		t.Fatalf("bad coop interval: %v", err)
	}
}

// A user name in uid: (rules, tasks, realtime grants) is resolved when the
// policy is read; an unknown one is an error naming the key and line.
func TestUIDByName(t *testing.T) {
	text := "rules:\n  - {name: a, lane: background, uid: nobody}\n  - {name: b, lane: background, uid: 1001}\n" +
		"tasks:\n  - {name: t, uid: root, nice: 5}\n" +
		"realtime:\n  grants:\n    uids: [nobody, 1000]\n    gids: [nogroup]\n"
	p, err := Parse("names.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody here")
	}
	want, _ := strconv.Atoi(nobody.Uid)
	if uint32(*p.Rules[0].UID) != uint32(want) || p.Matches[0].UID != uint32(want) || *p.Rules[1].UID != 1001 {
		t.Fatalf("rules' uids: %d, %d (want %d, 1001)", *p.Rules[0].UID, *p.Rules[1].UID, want)
	}
	if *p.Tasks[0].UID != 0 || int(p.Realtime.Grants.UIDs[0]) != want || p.Realtime.Grants.UIDs[1] != 1000 {
		t.Fatalf("tasks/grants: %+v %+v", p.Tasks[0], p.Realtime.Grants)
	}
	_, err = Parse("names.yaml", []byte("rules:\n  - name: a\n    lane: background\n    uid: bob-is-not-here\n"))
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != 4 || pe.Field != "rules[0].uid" || !strings.Contains(pe.Msg, `no user "bob-is-not-here"`) {
		t.Fatalf("unknown user: %v", err)
	}
}

// A YAML syntax error is reported at the line that holds it, not at the
// start of its enclosing block (where yaml.v3 puts it).
func TestSyntaxErrorAtItsLine(t *testing.T) {
	_, err := Load("testdata/syntax-line19.yaml", false)
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != 19 || pe.Field != "(syntax)" {
		t.Fatalf("got %v, want testdata/syntax-line19.yaml:19: (syntax): ...", err)
	}
	for _, tc := range []struct {
		text string
		line int
	}{
		{"rules:\n  - name: a\n    lane: background\n    exe: /x\n    comm: y\n  dport: 3\n", 6},
		{"rules:\n  - name: a\n    lane: background\n    exe: /x\n    comm: [y\n", 5},
		{"rules:\n  - name: a\n    lane: background\n    exe: /x\n    - comm\n", 5},
		{"rules: []\nfoo: bar: baz\n", 2},
	} {
		_, err := Parse("s.yaml", []byte(tc.text))
		if !errors.As(err, &pe) || pe.Line != tc.line {
			t.Errorf("%q: got %v, want line %d", tc.text, err, tc.line)
		}
	}
}

// Every error of a policy is shown in one run, each at its line, and a
// field that could not be read adds no follow-on error of its own.
func TestEveryErrorAtOnce(t *testing.T) {
	_, err := Load("testdata/many-errors.yaml", false)
	if err == nil {
		t.Fatal("accepted")
	}
	var got []string
	for _, e := range config.Each(err) {
		var pe *Error
		if !errors.As(e, &pe) {
			t.Fatalf("not a *policy.Error: %v", e)
		}
		got = append(got, fmt.Sprintf("%d %s", pe.Line, pe.Field))
	}
	want := []string{"4 interfaces[0].mode", "7 rules[0].lane", "12 rules[1].colour", "15 rules[2].uid", "17 access.group"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("errors:\n%v\ngot  %q\nwant %q", err, got, want)
	}
}

// A missing policy file is named with the way to make one, and without
// the root-ownership hint (real-time priority), which is about other files.
func TestMissingPolicyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	for _, rootOwned := range []bool{true, false} {
		_, err := Load(path, rootOwned)
		if err == nil {
			t.Fatal("missing file accepted")
		}
		msg := err.Error()
		for _, want := range []string{path + " does not exist", "--print-default-policy", ExamplesDir} {
			if !strings.Contains(msg, want) {
				t.Errorf("rootOwned=%v: %q lacks %q", rootOwned, msg, want)
			}
		}
		if strings.Contains(msg, "real-time") {
			t.Errorf("rootOwned=%v: %q gives the real-time hint", rootOwned, msg)
		}
	}
}

// A rule's absolute exe that is not installed is a warning at its line, as
// a missing interface is; patterns, base names and present files are not.
func TestMissingExecutables(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := "rules:\n  - {name: a, lane: background, exe: /usr/bin/lanes-test-resticc}\n" +
		"  - {name: b, lane: background, exe: " + self + "}\n  - {name: c, lane: background, exe: restic}\n" +
		"tasks:\n  - {name: t, exe: /opt/lanes-test-nothing/bin/x, nice: 5}\n  - {name: u, exe: '/opt/*/x', nice: 5}\n"
	p, err := Parse("exe.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range config.Each(p.MissingExecutables()) {
		got = append(got, e.Error())
	}
	want := []string{
		"exe.yaml:2: rules[0].exe: /usr/bin/lanes-test-resticc does not exist here (the rule matches once it does)",
		"exe.yaml:6: tasks[0].exe: /opt/lanes-test-nothing/bin/x does not exist here (the rule matches once it does)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// An access group that does not exist grants nobody; the checker refuses it
// at its line, as it refuses an unknown group in realtime.grants.
func TestUnknownAccessGroupRefused(t *testing.T) {
	for text, line := range map[string]int{
		"access:\n  group: nosuchgroup\n":                 2,
		"realtime:\n  grants:\n    gids: [nosuchgroup]\n": 3,
	} {
		_, err := Parse("bad.yaml", []byte(text))
		var pe *Error
		if !errors.As(err, &pe) || pe.Line != line || !strings.Contains(pe.Msg, `no group "nosuchgroup"`) {
			t.Errorf("%q: got %v, want an error at line %d naming the group", text, err, line)
		}
	}
	if _, err := Parse("ok.yaml", []byte("access:\n  group: root\n")); err != nil {
		t.Errorf("an existing group refused: %v", err)
	}
}

// Two process rules for the same executable are refused like two dst or uid
// rules: which lane wins would depend on their order.
func TestSameExeTwiceRefused(t *testing.T) {
	for _, text := range []string{
		"rules:\n  - {lane: background, exe: /usr/bin/curl}\n  - {lane: interactive, exe: /usr/bin/curl}\n",
		"rules:\n  - {lane: background, uid: 7}\n  - {lane: interactive, uid: 7}\n",
	} {
		_, err := Parse("bad.yaml", []byte(text))
		var pe *Error
		if !errors.As(err, &pe) || pe.Line != 3 || pe.Field != "rules[1]" || !strings.Contains(pe.Msg, "as rules[0]") {
			t.Errorf("%q: got %v, want rules[1] at line 3 refused as the same as rules[0]", text, err)
		}
	}
	ok := "rules:\n  - {lane: background, exe: /usr/bin/curl, uid: 7}\n  - {lane: interactive, exe: /usr/bin/curl}\n"
	if _, err := Parse("ok.yaml", []byte(ok)); err != nil {
		t.Errorf("rules told apart by uid refused: %v", err)
	}
}
