// auth.go: who may do what, the table "Who may move what" of
// docs/policy.md, decided from the caller's credentials and the policy's
// access section:
//   - root: everything;
//   - a member of the access group: any lane but realtime for any flow and
//     any process except PID 1 and lanes' own; realtime only with a
//     realtime grant (realtime.grants), and then only for their own
//     processes and flows;
//   - anyone else: their own flows and processes to background.
//
// "Own" for a flow: every local socket that matches it (protocol, local
// address if given, ports, destination) belongs to the caller; for a
// process, its real uid. Group membership and grants come from the
// credentials the kernel recorded when the caller connected
// (SO_PEERGROUPS, package peercred), never from a PID read later.
package apiserver

import (
	"fmt"

	"github.com/lanes-net/lanes/internal/api"
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

// Access is the policy's say in authorization.
type Access struct {
	Group string // access.group: "" = root alone is privileged
	// RealtimeGrant reports whether uid with these groups (primary
	// first) is in realtime.grants; nil: nobody but root is.
	RealtimeGrant func(uid uint32, gids []uint32) bool
}

// granted says whether c holds a realtime grant.
func (a Access) granted(c Cred) bool {
	return a.RealtimeGrant != nil && a.RealtimeGrant(c.UID, append([]uint32{c.GID}, c.Groups...))
}

// Owners answers ownership questions about the daemon's namespace. The daemon
// implements it with /proc; tests with a table.
type Owners interface {
	// FlowOwners returns the uids owning the local sockets that match the
	// flow; an error if there is none.
	FlowOwners(f api.Flow) ([]uint32, error)
	// ProcessOwner returns the real uid of a process.
	ProcessOwner(pid int) (uid uint32, err error)
	// LanesProcess says whether pid (or the process of thread pid) is the
	// daemon or a process it started (lanes-rtd).
	LanesProcess(pid int) bool
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

// Authorize decides whether c may perform r under the policy's access.
func Authorize(c Cred, r api.Request, o Owners, acc Access) error {
	member := Privileged(c, o, acc.Group)
	switch r.Op {
	case api.OpPing, api.OpStatus, api.OpFlows, api.OpLaneCgroup, api.OpSockLanes, api.OpComponent, api.OpUDPFlows,
		api.OpEvents:
		return nil
	case api.OpUnregister:
		if member {
			return nil
		}
		return ownFlow(c, *r.Flow, o)
	case api.OpRegister, api.OpMovePID:
		if c.UID == 0 {
			return nil
		}
		if r.Op == api.OpMovePID && r.PID == 1 {
			return fmt.Errorf("%w: only root may move PID 1 (its children follow it)", ErrPermission)
		}
		// a member moved lanes-rtd to background: SCHED_OTHER nice 19,
		// root's realtime sends' p99 112 µs -> 13.8 ms
		if r.Op == api.OpMovePID && o.LanesProcess(r.PID) {
			return fmt.Errorf("%w: only root may move lanes' own processes (the daemon, lanes-rtd)", ErrPermission)
		}
		switch {
		case r.Lane == lane.Realtime && !(member && acc.granted(c)):
			return fmt.Errorf("%w: the realtime lane needs %s, with a realtime grant (realtime.grants) for a member", ErrPermission, whoMay(o, acc.Group))
		case r.Lane == lane.Realtime: // a granted member: their own only
		case member:
			return nil
		case r.Lane != lane.Background:
			return fmt.Errorf("%w: only %s may put flows and processes in %s (anyone may demote their own to background)", ErrPermission, whoMay(o, acc.Group), r.Lane)
		}
		if r.Op == api.OpMovePID {
			return ownProcess(c, r.PID, o)
		}
		return ownFlow(c, *r.Flow, o)
	}
	return fmt.Errorf("%w: unknown op %q", ErrPermission, r.Op)
}

// ownFlow: every local socket matching f is c's.
func ownFlow(c Cred, f api.Flow, o Owners) error {
	uids, err := o.FlowOwners(f)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPermission, err)
	}
	for _, uid := range uids {
		if uid != c.UID {
			return fmt.Errorf("%w: a socket of flow %s belongs to uid %d, not you (uid %d); name your local address (src) if yours differs", ErrPermission, f, uid, c.UID)
		}
	}
	return nil
}

// ownProcess: process pid's real uid is c's.
func ownProcess(c Cred, pid int, o Owners) error {
	uid, err := o.ProcessOwner(pid)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPermission, err)
	}
	if uid != c.UID {
		return fmt.Errorf("%w: process %d belongs to uid %d, not you (uid %d)", ErrPermission, pid, uid, c.UID)
	}
	return nil
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
