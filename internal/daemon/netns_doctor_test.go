// Tests of what `lanes doctor` says inside a network namespace entered by
// `ip netns exec`, whose fresh /sys shows no cgroup v2 mount: the daemon
// there mounts its own, so doctor must not report cgroup lanes missing.
package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestDoctorCgroupV2InNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	if out, _ := ns.Command("grep", "-c", " cgroup2 ", "/proc/self/mountinfo").Output(); strings.TrimSpace(string(out)) != "0" {
		t.Skipf("ip netns exec shows a cgroup v2 mount here (%s): nothing to test", strings.TrimSpace(string(out)))
	}
	rep := doctorIn(t, ns)
	found := false
	for _, f := range rep.Features {
		if f.Name == "cgroup/v2" {
			found = true
			if !f.Present || !strings.Contains(f.Detail, "the daemon mounts its own") {
				t.Fatalf("doctor in a namespace: cgroup/v2 present=%v %q", f.Present, f.Detail)
			}
		}
	}
	if !found {
		t.Fatal("doctor reports no cgroup/v2")
	}
	// What doctor promises holds: the daemon there runs a program in a lane.
	d, sock := startDaemon(t, ns, devicePolicy("lo"))
	defer d.stop(t, syscall.SIGTERM)
	cg := filepath.Join(t.TempDir(), "cgroup")
	run := ns.Command(lanesBin, "run", "--socket", sock, "--lane", "background", "--", "sh", "-c", "cat /proc/self/cgroup > "+cg)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("lanes run in the namespace: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(cg); err != nil || !strings.Contains(string(b), "background") {
		t.Fatalf("the program's cgroup: %q, %v", b, err)
	}
}

// TestDoctorNamesProcessEventsInNamespace: inside a network namespace
// doctor names the source the task engine takes there (the BPF tracepoint
// programs), and the proc connector as absent for the namespace, not for
// the kernel.
func TestDoctorNamesProcessEventsInNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	rep := doctorIn(t, ns)
	t.Logf("doctor in a network namespace, process events: %s", rep.ProcessEvents)
	if strings.HasPrefix(rep.ProcessEvents, "poll") {
		t.Skipf("no BPF process events on this kernel: %s", rep.ProcessEvents)
	}
	if !strings.HasPrefix(rep.ProcessEvents, "bpf tracepoints") || !strings.Contains(rep.ProcessEvents, "not the initial one") {
		t.Errorf("process events in a namespace: %q, want the BPF tracepoints and the namespace named as the connector's reason", rep.ProcessEvents)
	}
	for _, f := range rep.Features {
		if f.Name == "proc-connector" && (f.Present || strings.Contains(f.Detail, "CONFIG_")) {
			t.Errorf("proc-connector in a namespace: present=%v %q, want absent for the namespace", f.Present, f.Detail)
		}
	}
}

// doctorReport is the part of `lanes doctor --json` these tests read.
type doctorReport struct {
	Features []struct {
		Name    string `json:"name"`
		Present bool   `json:"present"`
		Detail  string `json:"detail"`
	} `json:"features"`
	ProcessEvents string `json:"process_events"`
}

// doctorIn runs `lanes doctor --json` in ns and decodes its report.
func doctorIn(t *testing.T, ns *testutil.NetNS) doctorReport {
	t.Helper()
	out, err := ns.Command(lanesBin, "doctor", "--json").Output()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	var rep doctorReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}
