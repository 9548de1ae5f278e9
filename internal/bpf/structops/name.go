// name.go holds what every lanes struct_ops registration shares besides
// the registration itself: the name rules (kernel congestion control and
// qdisc names are global and at most 15 bytes), the per-datapath name
// derivation, writing the name into a struct_ops value before load, the
// wording of a failed load (and telling a kernel that registered no
// tcp_congestion_ops for BPF), and whether the kernel lists a name.
package structops

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// NameMax is the longest congestion control name (TCP_CA_NAME_MAX 16 incl. NUL).
const NameMax = 15

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,15}$`)

// CheckName says whether name can be a congestion control's name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("structops: congestion control name %q must be 1-%d of [A-Za-z0-9_]", name, NameMax)
	}
	return nil
}

// Name returns the registration name for one datapath: "lanes_" and
// 8 hex digits of a hash of the parts (instance, interface, namespace).
func Name(parts ...string) string {
	h := fnv.New32a()
	h.Write([]byte(strings.Join(parts, "\x00")))
	return fmt.Sprintf("lanes_%08x", h.Sum32())
}

// SetName writes name into the name field of a struct_ops congestion
// control's map value (internal/bpf/capcc, internal/bpf/ledbat).
func SetName(ms *ebpf.MapSpec, name string) error {
	if ms == nil || len(ms.Contents) != 1 {
		return errors.New("structops: object has no struct_ops value")
	}
	st, ok := btf.As[*btf.Struct](ms.Value)
	if !ok {
		return fmt.Errorf("structops: struct_ops value is %T, not a struct", ms.Value)
	}
	val, ok := ms.Contents[0].Value.([]byte)
	if !ok {
		return fmt.Errorf("structops: struct_ops value is %T, not bytes", ms.Contents[0].Value)
	}
	for _, m := range st.Members {
		if m.Name != "name" {
			continue
		}
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return fmt.Errorf("structops: size of name field: %w", err)
		}
		off := int(m.Offset.Bytes())
		if len(name) >= size || off+size > len(val) {
			return fmt.Errorf("structops: name %q does not fit the %d-byte name field", name, size)
		}
		val = append([]byte(nil), val...)
		clear(val[off : off+size])
		copy(val[off:], name)
		ms.Contents[0].Value = val
		return nil
	}
	return errors.New("structops: struct_ops value has no name field")
}

// ErrTypeUnregistered: the kernel runs struct_ops programs but registered
// no struct_ops type for tcp_congestion_ops, so no BPF congestion control
// loads on it. Linux 6.12 registers a struct_ops type whose struct has a
// `struct module *` member (tcp_congestion_ops' owner) only when its BTF has
// `struct module`, i.e. built with CONFIG_MODULES (bpf_struct_ops_desc_init;
// dmesg: "'struct module' btf id not found"). LoadError wraps it together
// with ebpf.ErrNotSupported.
var ErrTypeUnregistered = errors.New("the kernel registered no struct_ops tcp_congestion_ops (a kernel built without CONFIG_MODULES: its BTF lacks struct module)")

// enotsupp is the kernel's internal ENOTSUPP (524), which the verifier
// returns for an attach_btf_id that names no registered struct_ops type.
const enotsupp = syscall.Errno(524)

// typeUnregistered says whether err is the verifier's refusal of a
// struct_ops program whose struct the kernel registered no type for.
func typeUnregistered(err error) bool {
	var ve *ebpf.VerifierError
	if !errors.Is(err, enotsupp) || !errors.As(err, &ve) {
		return false
	}
	for _, l := range ve.Log {
		if strings.Contains(l, "is not a supported struct") {
			return true
		}
	}
	return false
}

// LoadError words a failed load or registration of a struct_ops congestion
// control. Registered by map update, a load that failed after the map was
// written may have registered it: that registration is removed here (it
// holds the map, which would outlive this process); the maps of that name
// in before (another registration's) are left alone.
func LoadError(what, name string, mode Mode, before map[ebpf.MapID]bool, err error) error {
	if mode == Update {
		if _, rerr := RemoveNew(name, before); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: register congestion control %s (%v): a congestion control of that name exists: %w", what, name, mode, err)
	}
	if typeUnregistered(err) {
		return fmt.Errorf("%s: load congestion control %s: %w: %w (%w)", what, name, ebpf.ErrNotSupported, ErrTypeUnregistered, err)
	}
	return fmt.Errorf("%s: load and register congestion control %s (%v): %w", what, name, mode, err)
}

// Registered reports whether the kernel lists name among its available
// congestion controls.
func Registered(name string) (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return false, fmt.Errorf("read available congestion controls: %w", err)
	}
	for _, n := range strings.Fields(string(b)) {
		if n == name {
			return true, nil
		}
	}
	return false, nil
}
