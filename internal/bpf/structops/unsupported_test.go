// unsupported_test.go: which load failures count as a kernel refusing
// struct_ops congestion controls (the tests skip there), and which are
// lanes' own (they fail).
package structops

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
)

func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("load: %w", ebpf.ErrNotSupported), true},
		{fmt.Errorf("program lanes_lb_init: %w", syscall.EOPNOTSUPP), true},
		{fmt.Errorf("load struct_ops: %w", syscall.Errno(524)), true},
		{errors.New("load program: attach_btf_id 1234 is not a supported struct"), true},
		{fmt.Errorf("load program: %w", syscall.EINVAL), false},
		{fmt.Errorf("register: %w", syscall.EEXIST), false},
	} {
		if got := Unsupported(c.err); got != c.want {
			t.Errorf("Unsupported(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
