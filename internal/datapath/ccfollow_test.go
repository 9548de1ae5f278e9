// ccfollow_test.go checks that the allow-list cgroup/setsockopt checks is
// read again at a write of net.ipv4.tcp_allowed_congestion_control (and
// every 5 s without the cgroup/sysctl program). The machine's list is
// never changed: the tests take a name out of lanes' copy and write the
// sysctl a name no kernel has, which the kernel refuses (ENOENT) before
// it changes the list, after the hook has run.
package datapath

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

const allowedCCSysctl = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// TestAllowListReadAgainAtEachWrite (N21): the copy followed the sysctl
// only at a reload. A write must make the copy the list again at once
// (2 s here, against the 5 s reading without the program).
func TestAllowListReadAgainAtEachWrite(t *testing.T) {
	h := openCCFollowHost(t, "ccf1", nil)
	if why := h.Capabilities()[CapCCAllowLive]; why != "on" {
		t.Skipf("cc_allow_live %s", why)
	}
	name, wrote := dropAndWrite(t, h)
	waitCCAllowed(t, h, name, wrote, 2*time.Second)
	t.Logf("a name taken out of the copy back %v after the write", time.Since(wrote))
	// The hook runs before the handler stores the write: a later reading
	// (ccSettle) must find what a reading at the record missed, here a
	// name taken out again after it.
	if err := h.ops.LanesCcAllowed.Delete(name); err != nil {
		t.Fatal(err)
	}
	if since := time.Since(wrote); since > ccSettle[len(ccSettle)-1]*9/10 {
		t.Skipf("%v passed since the write: the last reading may be over", since)
	}
	waitCCAllowed(t, h, name, wrote, 3*time.Second)
}

// TestAllowListReadAgainWithoutSysctlProgram: with cc_allow_live off the
// copy is the list again within a reading (ccPollEvery).
func TestAllowListReadAgainWithoutSysctlProgram(t *testing.T) {
	h := openCCFollowHost(t, "ccf2", map[Capability]string{CapCCAllowLive: "off (test)"})
	if h.ccFollow == nil || h.ccFollow.watch != nil {
		t.Fatalf("cc_allow_live off: follower %+v, want a polling one", h.ccFollow)
	}
	name, wrote := dropAndWrite(t, h)
	waitCCAllowed(t, h, name, wrote, ccPollEvery+2*time.Second)
}

// openCCFollowHost opens a host (closed when t ends) or skips where
// cgroup/setsockopt, whose list this is, is off.
func openCCFollowHost(t *testing.T, instance string, off map[Capability]string) *Host {
	requireCgroup2(t)
	if _, err := os.Stat(allowedCCSysctl); err != nil {
		t.Skip(err)
	}
	p := testutil.NewVethPair(t)
	var h *Host
	p.A.Do(t, func() (err error) {
		if h, err = OpenHost(HostConfig{Instance: instance, Off: off}); err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		return nil
	})
	if h.optLink == nil {
		t.Skipf("no cgroup/setsockopt here: %v", h.Capabilities())
	}
	return h
}

// dropAndWrite takes the first name out of the host's copy and writes
// the sysctl (from the initial namespace, the only one that may); it
// returns the name and when it wrote.
func dropAndWrite(t *testing.T, h *Host) ([16]byte, time.Time) {
	t.Helper()
	var name [16]byte
	var v uint8
	if !h.ops.LanesCcAllowed.Iterate().Next(&name, &v) {
		t.Skip("the machine's allow-list is empty")
	}
	if err := h.ops.LanesCcAllowed.Delete(name); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(allowedCCSysctl)
	wrote := time.Now()
	if err := os.WriteFile(allowedCCSysctl, []byte("lanes-no-such-cc\n"), 0); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("writing an unknown name to the sysctl: %v, want the kernel's ENOENT", err)
	}
	if after, _ := os.ReadFile(allowedCCSysctl); string(after) != string(before) {
		t.Errorf("the machine's list changed: %q -> %q", before, after)
	}
	return name, wrote
}

// waitCCAllowed waits until name is in the host's copy, failing once
// within has passed since wrote.
func waitCCAllowed(t *testing.T, h *Host, name [16]byte, wrote time.Time, within time.Duration) {
	t.Helper()
	var v uint8
	for h.ops.LanesCcAllowed.Lookup(name, &v) != nil {
		if time.Since(wrote) > within {
			t.Fatalf("%q not back in the copy %v after the write", unix.ByteSliceToString(name[:]), within)
		}
		time.Sleep(time.Millisecond)
	}
}
