// auth.go: who may do what. The rules of DESIGN.md's daemon contract:
// only privileged callers (root, or a member of the policy's group) change
// others' lanes; anyone may demote their own flows and processes to
// background; realtime needs a privileged caller (the realtime lane's own
// socket has its own grants).
//
// "Own" for a flow: every local socket that matches it (protocol, local
// address if given, ports, destination) belongs to the caller. Group
// membership comes from the credentials the kernel recorded when the caller
// connected (SO_PEERGROUPS, package peercred), never from a PID read later.
package api

import (
	"fmt"

	"github.com/lanes-net/lanes/internal/lane"
)

// Cred is the caller as the kernel saw it when it connected.
type Cred struct {
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups (SO_PEERGROUPS)
	// Privileged: root or a member of the access group. Set by the
	// server for each request, before the Handler sees it.
	Privileged bool
}

// Owners answers ownership questions about the daemon's namespace. The daemon
// implements it with /proc; tests with a table.
type Owners interface {
	// FlowOwners returns the uids owning the local sockets that match the
	// flow; an error if there is none.
	FlowOwners(f Flow) ([]uint32, error)
	// ProcessOwner returns the real uid of a process.
	ProcessOwner(pid int) (uid uint32, err error)
	// GroupID resolves a group name.
	GroupID(name string) (gid uint32, ok bool)
}

// ErrPermission is returned (wrapped) when a caller may not do a request.
var ErrPermission = fmt.Errorf("permission denied")

// Privileged says whether c is root or, by its primary or supplementary
// groups at connect, a member of group.
func Privileged(c Cred, o Owners, group string) bool {
	if c.UID == 0 {
		return true
	}
	if group == "" {
		return false
	}
	gid, ok := o.GroupID(group)
	if !ok {
		return false
	}
	if c.GID == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// Authorize decides whether c may perform r; group is the policy's access group.
func Authorize(c Cred, r Request, o Owners, group string) error {
	privileged := Privileged(c, o, group)
	switch r.Op {
	case OpPing, OpStatus, OpFlows, OpLaneCgroup, OpSockLanes, OpComponent:
		return nil
	case OpRegister, OpUnregister:
		if privileged {
			return nil
		}
		if r.Op == OpRegister && r.Lane != lane.Background {
			return fmt.Errorf("%w: only %s may put flows in %s (anyone may demote their own to background)", ErrPermission, whoMay(o, group), r.Lane)
		}
		uids, err := o.FlowOwners(*r.Flow)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrPermission, err)
		}
		for _, uid := range uids {
			if uid != c.UID {
				return fmt.Errorf("%w: a socket of flow %s belongs to uid %d, not you (uid %d); name your local address (src) if yours differs", ErrPermission, r.Flow, uid, c.UID)
			}
		}
		return nil
	case OpMovePID:
		if privileged {
			return nil
		}
		if r.Lane != lane.Background {
			return fmt.Errorf("%w: only %s may put processes in %s (anyone may demote their own to background)", ErrPermission, whoMay(o, group), r.Lane)
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

// whoMay names who is privileged by the policy key that says so
// (access.group), also when it is unset or names no group here.
func whoMay(o Owners, group string) string {
	if group == "" {
		return "root (the policy's access.group is unset; its members would also be allowed)"
	}
	if _, ok := o.GroupID(group); !ok {
		return fmt.Sprintf("root (the policy's access.group %q is no group on this machine)", group)
	}
	return fmt.Sprintf("root or members of the policy's access.group %q", group)
}
