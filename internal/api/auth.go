// auth.go: who may do what. The rules of DESIGN.md's daemon contract:
// only privileged callers (root, or a member of the policy's group) change
// others' lanes; anyone may demote their own flows and processes to
// background; realtime needs a privileged caller (the realtime lane's own
// socket has its own grants).
package api

import (
	"fmt"

	"github.com/lanes-net/lanes/internal/lane"
)

// Cred is the caller as the kernel saw it (SO_PEERCRED).
type Cred struct {
	PID int32
	UID uint32
	GID uint32
}

// Owners answers ownership questions about the daemon's namespace. The daemon
// implements it with /proc; tests with a table.
type Owners interface {
	// FlowOwner returns the uid owning the local socket with this 3-tuple.
	FlowOwner(f Flow) (uid uint32, err error)
	// ProcessOwner returns the real uid of a process.
	ProcessOwner(pid int) (uid uint32, err error)
	// InGroup says whether the caller (its pid's supplementary groups, or gid)
	// belongs to the named group.
	InGroup(c Cred, group string) bool
}

// ErrPermission is returned (wrapped) when a caller may not do a request.
var ErrPermission = fmt.Errorf("permission denied")

// Authorize decides whether c may perform r; group is the policy's access group.
func Authorize(c Cred, r Request, o Owners, group string) error {
	privileged := c.UID == 0 || (group != "" && o.InGroup(c, group))
	switch r.Op {
	case OpPing, OpStatus, OpFlows, OpLaneCgroup, OpSockLanes, OpComponent:
		return nil
	case OpRegister, OpUnregister:
		if privileged {
			return nil
		}
		if r.Op == OpRegister && r.Lane != lane.Background {
			return fmt.Errorf("%w: only root or group %q may put flows in %s (anyone may demote their own to background)", ErrPermission, group, r.Lane)
		}
		uid, err := o.FlowOwner(*r.Flow)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrPermission, err)
		}
		if uid != c.UID {
			return fmt.Errorf("%w: flow %s belongs to uid %d, not you (uid %d)", ErrPermission, r.Flow, uid, c.UID)
		}
		return nil
	case OpMovePID:
		if privileged {
			return nil
		}
		if r.Lane != lane.Background {
			return fmt.Errorf("%w: only root or group %q may put processes in %s", ErrPermission, group, r.Lane)
		}
		uid, err := o.ProcessOwner(r.PID)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrPermission, err)
		}
		if uid != c.UID {
			return fmt.Errorf("%w: process %d belongs to uid %d, not you (uid %d)", ErrPermission, r.PID, uid, c.UID)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown op %q", ErrPermission, r.Op)
}
