// main_test.go: the test binary acts as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`; and
// lanes-rtd, the realtime lane's data path, is built beside it, where the
// lane finds it as beside an installed lanes (the kernel VMs, without a C
// compiler, ship a prebuilt one there: scripts/kernel-vm.sh).
package deadline

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
)

func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(testbed.HelperMain(os.Args[1:]))
	}
	if exe, err := os.Executable(); err == nil && rtlane.FindHelper() == "" {
		if _, err := rtdbuild.Build(filepath.Dir(exe)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
