// name_test.go checks how LoadError words failures: the verifier's refusal
// of a struct_ops type the kernel never registered (a kernel built without
// CONFIG_MODULES) is ebpf.ErrNotSupported and ErrTypeUnregistered, so the
// daemon degrades and doctor names it; other failures are neither.
package structops

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
)

func TestLoadErrorTypeUnregistered(t *testing.T) {
	verifier := func(errno syscall.Errno, log ...string) error {
		return fmt.Errorf("field X: program y: %w", &ebpf.VerifierError{Cause: errno, Log: log})
	}
	for _, c := range []struct {
		what         string
		err          error
		unregistered bool
	}{
		{"no struct_ops type registered", verifier(enotsupp, "attach_btf_id 2583 is not a supported struct"), true},
		{"another ENOTSUPP", verifier(enotsupp, "some other refusal"), false},
		{"a verifier rejection", verifier(syscall.EACCES, "attach_btf_id 2583 is not a supported struct"), false},
		{"no verifier log", fmt.Errorf("load: %w", enotsupp), false},
		{"name taken", fmt.Errorf("update: %w", syscall.EEXIST), false},
	} {
		err := LoadError("capcc", "lanes_00000000", Link, nil, c.err)
		if got := errors.Is(err, ErrTypeUnregistered); got != c.unregistered {
			t.Errorf("%s: ErrTypeUnregistered = %v, want %v (%v)", c.what, got, c.unregistered, err)
		}
		if got := errors.Is(err, ebpf.ErrNotSupported); got != c.unregistered {
			t.Errorf("%s: ebpf.ErrNotSupported = %v, want %v (%v)", c.what, got, c.unregistered, err)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: the cause is lost: %v", c.what, err)
		}
	}
}
