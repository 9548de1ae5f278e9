// unsupported.go tells a kernel that refuses struct_ops TCP congestion
// controls from a failure of lanes' own: the daemon runs without them
// (background uploads held by a cwnd clamp instead, caps only clamp
// growth), and their tests skip there with the kernel's reason.
package structops

import (
	"errors"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
)

// Unsupported says whether err is the kernel refusing a struct_ops
// congestion control as a kind rather than lanes' program: a feature
// cilium/ebpf found missing (ebpf.ErrNotSupported, which LoadError adds to
// ErrTypeUnregistered), EOPNOTSUPP, or the verifier's refusal of a struct
// it registered no type for (ENOTSUPP, "is not a supported struct": a
// kernel built without CONFIG_MODULES, as docs/android.md tells).
func Unsupported(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, enotsupp) || strings.Contains(err.Error(), "is not a supported struct")
}
