// capcc_test.go checks that the congestion control loads on this kernel
// (verifier, CUBIC kfuncs, struct_ops), registers under the given name, and
// is gone after Close; and that two can be registered side by side.
package capcc

import (
	"testing"

	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestLoadRegisterClose(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	a, b := Name("t1", "eth0", "1"), Name("t2", "eth0", "1")
	if a == b || len(a) > NameMax {
		t.Fatalf("names %q %q", a, b)
	}
	ca, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Load(b)
	if err != nil {
		ca.Close()
		t.Fatal(err)
	}
	if _, err := Load(a); err == nil {
		t.Error("a second registration of the same name succeeded")
	}
	for _, n := range []string{a, b} {
		if ok, err := Registered(n); err != nil || !ok {
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
		if ok, _ := Registered(n); ok {
			t.Errorf("%s still registered after Close", n)
		}
	}
	if err := Probe(); err != nil {
		t.Errorf("Probe: %v", err)
	}
}

func TestNameTooLong(t *testing.T) {
	if _, err := Load("lanes_0123456789abcdef"); err == nil {
		t.Fatal("a 22-byte name was accepted")
	}
}
