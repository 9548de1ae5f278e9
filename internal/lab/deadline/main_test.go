// main_test.go: the test binary acts as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`; and
// lanes-rtd is built beside it where a C compiler is (make test), so the
// lanes-rtd configurations run as from an installed lanes; elsewhere (the
// kernel VMs) they are skipped, with a note.
package deadline

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
)

func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(testbed.HelperMain(os.Args[1:]))
	}
	if exe, err := os.Executable(); err == nil {
		if _, err := rtdbuild.Build(filepath.Dir(exe)); err != nil {
			fmt.Fprintln(os.Stderr, "the lanes-rtd configurations will be skipped:", err)
		}
	}
	os.Exit(m.Run())
}
