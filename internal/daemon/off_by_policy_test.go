// Tests that a feature the policy leaves off is reported as off, exit 0,
// by a real daemon and the real CLI: `lanes coop status` without a coop
// section is a state, not an error.
package daemon_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestCoopStatusOffByPolicy(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	for _, tc := range []struct{ policy, want string }{
		{devicePolicy("lo"), "coop: off (no coop section in the policy)\n"},
		{devicePolicy("lo") + "coop:\n  enabled: false\n", "coop: off (coop.enabled is false in the policy)\n"},
	} {
		d, sock := startDaemon(t, ns, tc.policy)
		out, err := ns.Command(lanesBin, "coop", "status", "--socket", sock).CombinedOutput()
		if err != nil || string(out) != tc.want {
			t.Errorf("coop status: %v, %q; want exit 0, %q", err, out, tc.want)
		}
		out, err = ns.Command(lanesBin, "coop", "status", "--socket", sock, "--json").Output()
		if err != nil || !strings.HasPrefix(string(out), `{"off":"`) {
			t.Errorf("coop status --json: %v, %q", err, out)
		}
		d.stop(t, syscall.SIGTERM)
	}
}
