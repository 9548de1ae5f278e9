// capcc_test.go checks that the congestion control loads on this kernel
// (verifier, CUBIC kfuncs, struct_ops), registers under the given name, and
// is gone after Close, both through a bpf_link and by map update (the path
// of kernels before 6.4); that two can be registered side by side; and
// that one registered by map update outlives its objects (as it outlives a
// killed process) until structops.Remove finds it by name.
package capcc

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestLoadRegisterClose(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []structops.Mode{structops.Link, structops.Update} {
		t.Run(mode.String(), func(t *testing.T) { loadRegisterClose(t, mode) })
	}
}

func loadRegisterClose(t *testing.T, mode structops.Mode) {
	if mode == structops.Link && structops.LinkSupported() != nil {
		t.Skip(structops.LinkSupported())
	}
	a, b := structops.Name("t1", "eth0", mode.String()), structops.Name("t2", "eth0", mode.String())
	if a == b || len(a) > structops.NameMax {
		t.Fatalf("names %q %q", a, b)
	}
	ca, err := Load(a, mode)
	skipIfUnsupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Load(b, mode)
	if err != nil {
		ca.Close()
		t.Fatal(err)
	}
	if ca.Mode != mode {
		t.Errorf("registered by %v, asked %v", ca.Mode, mode)
	}
	if _, err := Load(a, mode); err == nil {
		t.Error("a second registration of the same name succeeded")
	}
	for _, n := range []string{a, b} {
		if ok, err := structops.Registered(n); err != nil || !ok {
			t.Errorf("%s registered = %v, %v", n, ok, err)
		}
	}
	if err := ca.Close(); err != nil {
		t.Error(err)
	}
	if err := cb.Close(); err != nil {
		t.Error(err)
	}
	for _, n := range []string{a, b} {
		if ok, _ := structops.Registered(n); ok {
			t.Errorf("%s still registered after Close", n)
		}
	}
	if err := Probe(); err != nil {
		t.Errorf("Probe: %v", err)
	}
}

// TestMapUpdateOutlivesItsObjects closes the objects of a congestion
// control registered by map update without unregistering it, as a
// SIGKILL does: it stays registered and listed, and Remove takes it away.
func TestMapUpdateOutlivesItsObjects(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	name := structops.Name("t-orphan", "eth0", "1")
	c, err := Load(name, structops.Update)
	skipIfUnsupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { structops.Remove(name) })
	c.objs.Close() // the process's file descriptors go; the registration holds the map
	if ok, _ := structops.Registered(name); !ok {
		t.Fatalf("%s unregistered when its objects closed (expected it to stay, as on 5.10-6.3)", name)
	}
	left, err := structops.Find(func(n string) bool { return n == name })
	if err != nil || len(left) != 1 {
		t.Fatalf("Find: %v, %v", left, err)
	}
	done, err := structops.Remove(name, "lanes_00000000")
	if err != nil || !slices.Equal(done, []string{name}) {
		t.Fatalf("Remove: %v, %v", done, err)
	}
	if ok, _ := structops.Registered(name); ok {
		t.Errorf("%s still registered after Remove", name)
	}
	if left, _ := structops.Find(func(n string) bool { return n == name }); len(left) != 0 {
		t.Errorf("map still listed after Remove: %v", left)
	}
}

// skipIfUnsupported skips t when Load failed for a kernel feature the
// congestion control needs (structops.Unsupported: ebpf.ErrNotSupported, as
// Probe reports it to the daemon, CUBIC's kfuncs are callable from
// struct_ops from 5.13; or a kernel that refuses struct_ops congestion
// controls, EOPNOTSUPP/ENOTSUPP), naming it; any other failure is the test's.
func skipIfUnsupported(t *testing.T, err error) {
	t.Helper()
	if structops.Unsupported(err) {
		t.Skipf("kernel lacks a feature of the lanes congestion control: %v", err)
	}
}

func TestNameTooLong(t *testing.T) {
	if _, err := Load("lanes_0123456789abcdef", structops.Auto); err == nil {
		t.Fatal("a 22-byte name was accepted")
	}
}
