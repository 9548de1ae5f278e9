// ccsysctl_test.go: a write of the allow-list reaches the reader, and the
// program leaves the write's own result alone.
package ccsysctl

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

const allowedPath = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// TestWriteOfTheAllowListWakesTheReader writes a name no kernel has: the
// kernel refuses it (ENOENT) before changing the list, so the machine's
// list stays as it is, yet the program sees the write and posts a record.
// A read posts none.
func TestWriteOfTheAllowListWakesTheReader(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	root := "/sys/fs/cgroup"
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
		root = "/sys/fs/cgroup/unified"
	}
	w, err := Attach(root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before, err := os.ReadFile(allowedPath)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan error, 4)
	go func() {
		for {
			err := w.Wait()
			woke <- err
			if err != nil {
				return
			}
		}
	}()
	select {
	case err := <-woke:
		t.Fatalf("a record before any write (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	err = os.WriteFile(allowedPath, []byte("lanes-no-such-cc\n"), 0)
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("write of an unknown name: %v, want the kernel's ENOENT untouched", err)
	}
	if after, _ := os.ReadFile(allowedPath); string(after) != string(before) {
		t.Fatalf("the machine's list changed: %q -> %q", before, after)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record of the write within 10 s")
	}
	w.Close()
	for err := range woke {
		if err != nil {
			break
		}
		t.Error("a second record for one write")
	}
}
