// netnscookie_test.go: the cookie read through the program is the
// kernel's own (SO_NETNS_COOKIE where the kernel has it) and differs
// between namespaces.
package netnscookie

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/testutil"
)

func read(t *testing.T) uint64 {
	t.Helper()
	c, err := Read(features.CgroupV2Mount())
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks cgroup/sock_create's bpf_get_netns_cookie (5.7): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReadMatchesKernel(t *testing.T) {
	testutil.RequireRoot(t)
	ns, other := testutil.NewNetNS(t), testutil.NewNetNS(t)
	var inNS, inOther uint64
	ns.Do(t, func() error { inNS = read(t); return nil })
	other.Do(t, func() error { inOther = read(t); return nil })
	if inNS == inOther {
		t.Fatalf("two namespaces read the same cookie %d", inNS)
	}
	ns.Do(t, func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		want, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		if err != nil {
			t.Logf("no SO_NETNS_COOKIE to compare with (5.14): %v", err)
			return nil
		}
		if inNS != want {
			t.Errorf("cookie through BPF %d; SO_NETNS_COOKIE %d", inNS, want)
		}
		return nil
	})
	t.Logf("cookies of the two namespaces: %d, %d", inNS, inOther)
}
