// fakeable.go: the checker's warning about grants any user can claim. A
// rule that gives realtime (a lane rule, a task rule's lane) or a real-time
// CPU policy (fifo, rr) and matches only by what a process or socket says
// of itself (DSCP, comm, a base-name exe, cmdline, parent) is matched by
// any user's process: nobody's 300 EF datagrams all went realtime under
// dscp.ef_realtime, and nobody's /bin/sleep renamed to pipewire matched a
// `comm: pipewire -> fifo 20, lane realtime` rule. What a user cannot fake:
// uid, cgroup, an absolute exe path (root's files).
package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// FakeableGrants reports, as warnings, each grant of realtime or of a
// real-time CPU policy that any local user can claim.
func (p *Policy) FakeableGrants() error {
	var errs []error
	if p.DSCP.ExpeditedRealtime {
		errs = append(errs, p.ErrorAt("dscp.ef_realtime",
			"any local user's socket marked EF (46) goes realtime; match realtime by exe and uid instead"))
	}
	for i, r := range p.Rules {
		if r.Lane == lane.Realtime && fakeableOnly(r.Exe, r.UID, r.Cgroup, r.Comm != "" || r.DSCP != nil) {
			errs = append(errs, p.ErrorAt(fmt.Sprintf("rules[%d]", i),
				"%q grants realtime by %s, which any user's process can claim; add uid: (and an absolute exe:)", r.Name, fakedBy(r.Exe, r.Comm, r.DSCP != nil, "", "")))
		}
	}
	for i, r := range p.Tasks {
		rt := r.Policy == "fifo" || r.Policy == "rr" || r.Lane == lane.Realtime
		self := r.Comm != "" || r.Cmdline != "" || r.Parent != ""
		if rt && fakeableOnly(r.Exe, r.UID, r.Cgroup, self) {
			errs = append(errs, p.ErrorAt(fmt.Sprintf("tasks[%d]", i),
				"%q grants %s by %s, which any user's process can claim; add uid: (and an absolute exe:)",
				r.Name, grantOf(r), fakedBy(r.Exe, r.Comm, false, r.Cmdline, r.Parent)))
		}
	}
	return errors.Join(errs...)
}

// fakeableOnly: a rule matching by something a process says of itself
// (self, or a base-name exe), with no uid, no cgroup and no absolute exe.
func fakeableOnly(exe string, uid *config.UID, cgroup string, self bool) bool {
	absExe := filepath.IsAbs(exe) && !strings.ContainsAny(exe, "*?[")
	if uid != nil || cgroup != "" || absExe {
		return false
	}
	return self || exe != ""
}

// fakedBy names the fields a rule matches by that a user can fake.
func fakedBy(exe, comm string, dscp bool, cmdline, parent string) string {
	var by []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"exe " + exe, exe != ""}, {"comm " + comm, comm != ""}, {"dscp", dscp}, {"cmdline", cmdline != ""}, {"parent " + parent, parent != ""}} {
		if f.set {
			by = append(by, f.name)
		}
	}
	return strings.Join(by, " and ")
}

// grantOf names what a task rule grants.
func grantOf(r config.TaskRule) string {
	if r.Policy == "fifo" || r.Policy == "rr" {
		return r.Policy
	}
	return "realtime"
}
