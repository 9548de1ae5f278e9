// capcc.go loads the lanes BPF congestion control under a given name and
// registers it through a struct_ops bpf_link; Close unregisters it. Name
// derives a per-datapath name (kernel congestion control names are global
// and at most 15 bytes).
package capcc

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// NameMax is the longest congestion control name (TCP_CA_NAME_MAX 16 incl. NUL).
const NameMax = 15

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,15}$`)

// CheckName says whether name can be a congestion control's name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("capcc: congestion control name %q must be 1-%d of [A-Za-z0-9_]", name, NameMax)
	}
	return nil
}

// Name returns the congestion control name for one datapath: "lanes_" and
// 8 hex digits of a hash of the parts (instance, interface, namespace).
func Name(parts ...string) string {
	h := fnv.New32a()
	h.Write([]byte(strings.Join(parts, "\x00")))
	return fmt.Sprintf("lanes_%08x", h.Sum32())
}

// CC is a loaded and registered congestion control.
type CC struct {
	Name string
	objs CapccObjects
	link link.Link
}

// Load loads the congestion control named name and registers it; the name
// disappears from the kernel when Close runs or the process dies.
func Load(name string) (*CC, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	spec, err := LoadCapcc()
	if err != nil {
		return nil, fmt.Errorf("capcc: read object: %w", err)
	}
	if err := SetName(spec.Maps[CapccMapLanesCapcc], name); err != nil {
		return nil, err
	}
	c := &CC{Name: name}
	if err := spec.LoadAndAssign(&c.objs, nil); err != nil {
		return nil, fmt.Errorf("capcc: load struct_ops %s: %w", name, err)
	}
	if c.link, err = link.AttachStructOps(link.StructOpsOptions{Map: c.objs.LanesCapcc}); err != nil {
		c.objs.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("capcc: register congestion control %s: a congestion control of that name exists: %w", name, err)
		}
		return nil, fmt.Errorf("capcc: register congestion control %s: %w", name, err)
	}
	return c, nil
}

// SetName writes name into the name field of a struct_ops congestion
// control's map value (also used by internal/bpf/ledbat).
func SetName(ms *ebpf.MapSpec, name string) error {
	if ms == nil || len(ms.Contents) != 1 {
		return errors.New("capcc: object has no struct_ops value")
	}
	st, ok := btf.As[*btf.Struct](ms.Value)
	if !ok {
		return fmt.Errorf("capcc: struct_ops value is %T, not a struct", ms.Value)
	}
	val, ok := ms.Contents[0].Value.([]byte)
	if !ok {
		return fmt.Errorf("capcc: struct_ops value is %T, not bytes", ms.Contents[0].Value)
	}
	for _, m := range st.Members {
		if m.Name != "name" {
			continue
		}
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return fmt.Errorf("capcc: size of name field: %w", err)
		}
		off := int(m.Offset.Bytes())
		if len(name) >= size || off+size > len(val) {
			return fmt.Errorf("capcc: name %q does not fit the %d-byte name field", name, size)
		}
		val = append([]byte(nil), val...)
		clear(val[off : off+size])
		copy(val[off:], name)
		ms.Contents[0].Value = val
		return nil
	}
	return errors.New("capcc: struct_ops value has no name field")
}

// Close unregisters the congestion control. Sockets that use it keep it
// (the kernel holds a reference) until they close.
func (c *CC) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.link != nil {
		if err := c.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("capcc: unregister %s: %w", c.Name, err))
		}
	}
	if err := c.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("capcc: close %s: %w", c.Name, err))
	}
	return errors.Join(errs...)
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

// Probe loads, registers and unregisters a congestion control under a
// scratch name: nil when this kernel can run the lanes congestion control.
func Probe() error {
	c, err := Load(fmt.Sprintf("lanes_p%x", os.Getpid()&0xffffff))
	if err != nil {
		return err
	}
	return c.Close()
}
