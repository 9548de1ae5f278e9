// ledbat.go loads the LEDBAT++ congestion control under a given name with
// its queuing-delay target and registers it through a struct_ops bpf_link;
// Close unregisters it. Names follow capcc's (global, at most 15 bytes).
package ledbat

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
)

// CC is a loaded and registered LEDBAT++ congestion control.
type CC struct {
	Name   string
	Target time.Duration
	objs   LedbatObjects
	link   link.Link
}

// Load loads LEDBAT++ named name with the given queuing-delay target and
// registers it; the name disappears when Close runs or the process dies.
func Load(name string, target time.Duration) (*CC, error) {
	if err := capcc.CheckName(name); err != nil {
		return nil, err
	}
	if target < time.Millisecond || target > 10*time.Second {
		return nil, fmt.Errorf("ledbat: target %v out of range 1ms..10s", target)
	}
	spec, err := LoadLedbat()
	if err != nil {
		return nil, fmt.Errorf("ledbat: read object: %w", err)
	}
	if err := capcc.SetName(spec.Maps[LedbatMapLanesLedbat], name); err != nil {
		return nil, err
	}
	if err := spec.Variables[LedbatVarCFG].Set(uint32(target / time.Microsecond)); err != nil {
		return nil, fmt.Errorf("ledbat: set target: %w", err)
	}
	c := &CC{Name: name, Target: target}
	if err := spec.LoadAndAssign(&c.objs, nil); err != nil {
		return nil, fmt.Errorf("ledbat: load struct_ops %s: %w", name, err)
	}
	if c.link, err = link.AttachStructOps(link.StructOpsOptions{Map: c.objs.LanesLedbat}); err != nil {
		c.objs.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("ledbat: register congestion control %s: a congestion control of that name exists: %w", name, err)
		}
		return nil, fmt.Errorf("ledbat: register congestion control %s: %w", name, err)
	}
	return c, nil
}

// Close unregisters the congestion control; sockets using it keep it until
// they close.
func (c *CC) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.link != nil {
		if err := c.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ledbat: unregister %s: %w", c.Name, err))
		}
	}
	if err := c.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("ledbat: close %s: %w", c.Name, err))
	}
	return errors.Join(errs...)
}

// Probe loads, registers and unregisters LEDBAT++ under a scratch name: nil
// when this kernel can run it.
func Probe() error {
	c, err := Load(fmt.Sprintf("lanes_l%x", os.Getpid()&0xffffff), 25*time.Millisecond)
	if err != nil {
		return err
	}
	return c.Close()
}
