// capcc.go loads the lanes BPF congestion control under a given name and
// registers it (internal/bpf/structops: a struct_ops bpf_link on 6.4+, a
// map update before); Close unregisters it. Names follow structops' rules
// (structops.Name derives a per-datapath one).
package capcc

import (
	"errors"
	"fmt"
	"os"

	"github.com/lanes-net/lanes/internal/bpf/structops"
)

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
	if err := structops.CheckName(name); err != nil {
		return nil, err
	}
	spec, err := LoadCapcc()
	if err != nil {
		return nil, fmt.Errorf("capcc: read object: %w", err)
	}
	ms := spec.Maps[CapccMapLanesCapcc]
	if err := structops.SetName(ms, name); err != nil {
		return nil, err
	}
	c := &CC{Name: name, Mode: mode.Resolve()}
	if err := structops.Prepare(ms, name, c.Mode); err != nil {
		return nil, err
	}
	before := structops.IDs(name)
	if err := spec.LoadAndAssign(&c.objs, nil); err != nil {
		return nil, structops.LoadError("capcc", name, c.Mode, before, err)
	}
	if c.reg, err = structops.Register(c.objs.LanesCapcc, name, c.Mode); err != nil {
		c.objs.Close()
		return nil, structops.LoadError("capcc", name, c.Mode, before, err)
	}
	return c, nil
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
