// main_test.go: the test binary acts as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`.
package deadline

import (
	"os"
	"testing"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(testbed.HelperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}
