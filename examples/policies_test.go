// policies_test.go: the example policies of examples/policies/ (laptop,
// home server, robot, Android phone; shipped in /usr/share/doc/lanes/examples) pass the
// policy checker admins run, `lanes daemon --check`, and each tells the
// story it is named for.
package examples_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/policy"
)

func TestExamplePolicies(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "lanes")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/lanes").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// What each story needs: its interface mode, and the lanes it uses.
	stories := map[string]func(p *policy.Policy) string{
		"laptop.yaml": func(p *policy.Policy) string {
			if p.Interfaces[0].Name != "default-route" || len(p.Rules) == 0 {
				return "a laptop follows the default route"
			}
			return ""
		},
		"home-server.yaml": func(p *policy.Policy) string {
			if p.Interfaces[0].Mode != policy.Shaped || p.Interfaces[0].Uplink == 0 {
				return "a home server shapes its known uplink"
			}
			return ""
		},
		"android.yaml": func(p *policy.Policy) string {
			bg := false
			for _, m := range p.Matches {
				if m.Kind == policy.MatchAndroid && m.HasUID {
					return "an Android phone's policy names no system uid"
				}
				bg = bg || m.Kind == policy.MatchAndroid && m.Android.String() == "background" && m.Lane.String() == "background"
			}
			if !bg {
				return "an Android phone puts background apps in the background lane"
			}
			return ""
		},
		"robot.yaml": func(p *policy.Policy) string {
			if !p.Realtime.Enabled || len(p.Tasks) == 0 {
				return "a robot runs the realtime lane and a task rule for its control loop"
			}
			return ""
		},
	}
	files, _ := filepath.Glob("policies/*.yaml")
	if len(files) != len(stories) {
		t.Errorf("examples/policies holds %v, want the %d stories", files, len(stories))
	}
	for _, f := range files {
		// Checkouts are not root's: the ownership check is the daemon's, not the example's.
		out, err := exec.Command(bin, "daemon", "--check", "--allow-non-root-policy", "--policy", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": ok") {
			t.Errorf("lanes daemon --check --policy %s: %v\n%s", f, err, out)
			continue
		}
		t.Logf("lanes daemon --check --policy %s:\n%s", f, out)
		p, err := policy.Load(f, false)
		if err != nil {
			t.Fatal(err)
		}
		if story := stories[filepath.Base(f)]; story == nil {
			t.Errorf("%s: no story", f)
		} else if miss := story(p); miss != "" {
			t.Errorf("%s: %s", f, miss)
		}
	}
}
