// capcc.go loads the lanes BPF congestion control under a given name and
// registers it (internal/bpf/structops: a struct_ops bpf_link on 6.4+, a
// map update before); Close unregisters it. Name derives a per-datapath
// name (kernel congestion control names are global and at most 15 bytes).
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

	"github.com/lanes-net/lanes/internal/bpf/structops"
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
	Mode structops.Mode // how it is registered
	objs CapccObjects
	reg  *structops.Registration
}

// Load loads the congestion control named name and registers it the way
// mode says (structops.Auto: a bpf_link where the kernel has one). With a
// link the name disappears when Close runs or the process dies; registered
// by map update it disappears when Close runs or structops.Remove(name).
func Load(name string, mode structops.Mode) (*CC, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	spec, err := LoadCapcc()
	if err != nil {
		return nil, fmt.Errorf("capcc: read object: %w", err)
	}
	ms := spec.Maps[CapccMapLanesCapcc]
	if err := SetName(ms, name); err != nil {
		return nil, err
	}
	c := &CC{Name: name, Mode: mode.Resolve()}
	if err := structops.Prepare(ms, name, c.Mode); err != nil {
		return nil, err
	}
	before := structops.IDs(name)
	if err := spec.LoadAndAssign(&c.objs, nil); err != nil {
		return nil, LoadError("capcc", name, c.Mode, before, err)
	}
	if c.reg, err = structops.Register(c.objs.LanesCapcc, name, c.Mode); err != nil {
		c.objs.Close()
		return nil, LoadError("capcc", name, c.Mode, before, err)
	}
	return c, nil
}

// LoadError words a failed load or registration of a struct_ops congestion
// control. Registered by map update, a load that failed after the map was
// written may have registered it: that registration is removed here (it
// holds the map, which would outlive this process); the maps of that name
// in before (another registration's) are left alone.
func LoadError(what, name string, mode structops.Mode, before map[ebpf.MapID]bool, err error) error {
	if mode == structops.Update {
		if _, rerr := structops.RemoveNew(name, before); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: register congestion control %s (%v): a congestion control of that name exists: %w", what, name, mode, err)
	}
	return fmt.Errorf("%s: load and register congestion control %s (%v): %w", what, name, mode, err)
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
	if err := c.reg.Close(); err != nil {
		errs = append(errs, fmt.Errorf("capcc: unregister %s: %w", c.Name, err))
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

// ProbePrefix starts the scratch names of Probe ("lanes_p" and the pid in
// hex); ledbat's probe uses "lanes_l".
const ProbePrefix = "lanes_p"

// Probe loads, registers and unregisters a congestion control under a
// scratch name: nil when this kernel can run the lanes congestion control.
func Probe() error {
	c, err := Load(fmt.Sprintf("%s%x", ProbePrefix, os.Getpid()), structops.Auto)
	if err != nil {
		return err
	}
	return c.Close()
}
