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

// enotsupp is the kernel's internal ENOTSUPP (524), which the BPF syscall
// returns as is for a struct_ops type it does not support.
const enotsupp = syscall.Errno(524)

// Unsupported says whether err is the kernel refusing a struct_ops
// congestion control as a kind rather than lanes' program: a feature
// cilium/ebpf found missing (ebpf.ErrNotSupported), EOPNOTSUPP or ENOTSUPP,
// or the verifier's "is not a supported struct" (a kernel that registered
// no BPF tcp_congestion_ops: the GKI-configured 6.12 in docs/android.md).
func Unsupported(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, enotsupp) || strings.Contains(err.Error(), "is not a supported struct")
}
