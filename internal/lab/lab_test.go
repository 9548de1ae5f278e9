// lab_test.go: every experiment is linked in and registered once.
package lab

import (
	"testing"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func TestRegistry(t *testing.T) {
	for _, name := range []string{"accuracy", "apps", "coop", "coop-dynamics", "coop-mixed", "deadline",
		"lbe", "lbe-feedback", "lbe-overhead", "lbe-remote", "lbe-switch", "rt", "tun-probe"} {
		if _, ok := testbed.Lookup(name); !ok {
			t.Errorf("experiment %s not registered", name)
		}
	}
	if n := len(testbed.List()); n != 13 {
		t.Errorf("%d experiments registered, want 13", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	testbed.Register(testbed.Experiment{Name: "lbe"})
}
