// capcc.go: the host's congestion controls as the kernel registers them
// (struct_ops: internal/bpf/structops): their names, one each per instance
// and namespace, and the removal of those a killed run left registered by
// map update; and the cap-enforcing one (internal/bpf/capcc) with the cwnd
// caps sock_ops applies through it (the cooperative controller's uplink
// caps). The background lane's LEDBAT++ is bgcc.go's.
package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/lane"
)

// Caps is the host's caps: the cwnd caps (lanes' own congestion control
// enforces them) and the downlink caps (rwndcap.go), which sock_ops
// applies per lane or socket.
type Caps struct {
	guard *guard
	ops   *sockops.Objects // nil without lanes' own sock_ops: every cap refused
	cc    *capcc.CC        // nil when the kernel cannot run it
	off   map[Capability]string
	seen  socketSeer // whether sock_ops knows a socket (LaneMaps)
}

// socketSeer says whether sock_ops has seen a socket that has not closed.
type socketSeer interface {
	sockSeen(cookie uint64) bool
}

// capCCName and bgCCName name this host's congestion controls, one each
// per instance and namespace (id: netns cookie, or inode where sock_ops
// matches by inode): names are global to the kernel.
func capCCName(instance string, id uint64) string { return structops.Name(instance, fmt.Sprint(id)) }

func bgCCName(instance string, id uint64) string {
	return structops.Name(instance, fmt.Sprint(id), "background")
}

// adoptCCs removes the congestion controls a killed run of this instance
// in this namespace left registered by map update (kernels before 6.4, or
// StructOps Update), so that this run can register its own under the same
// names. A registration through a bpf_link died with its process.
func (h *Host) adoptCCs(id uint64) {
	done, err := structops.Remove(capCCName(h.cfg.Instance, id), bgCCName(h.cfg.Instance, id))
	if len(done) > 0 {
		slog.Info("datapath: removed congestion controls a killed run left registered", "instance", h.cfg.Instance, "names", done)
	}
	if err != nil {
		slog.Warn("datapath: removing left-over congestion controls", "instance", h.cfg.Instance, "err", err)
	}
}

// RemoveLeftoverCCs unregisters what a killed daemon of instance left
// registered by map update, in the calling thread's namespace (cookie and
// inode; `lanes reset`) or, for a vanished namespace, under its recorded
// cookie and inode. It returns the names removed.
func RemoveLeftoverCCs(instance string, ids ...uint64) ([]string, error) {
	if len(ids) == 0 {
		ns, err := currentNS()
		if err != nil {
			return nil, err
		}
		defer ns.close()
		if c, err := ns.netnsCookie(); err == nil {
			ids = append(ids, c)
		}
		if ino, err := ns.netnsInode(); err == nil {
			ids = append(ids, uint64(ino))
		}
	}
	var names []string
	for _, id := range ids {
		if id != 0 {
			names = append(names, capCCName(instance, id), bgCCName(instance, id))
		}
	}
	return structops.Remove(names...)
}

var errNoSockops = errors.New("datapath: sock_ops is off: no cwnd caps")

// ErrSocketUnmanaged is a cwnd cap refused for a socket that sock_ops has
// seen no callback of (it was established before lanes attached and never
// asked for RTT callbacks), so the cap could never be applied.
var ErrSocketUnmanaged = errors.New("datapath: socket predates sock_ops (no callbacks): cap not applicable")

// SetLaneCwndCap caps the congestion window (segments) of every TCP socket
// of a lane; 0 removes the cap. sock_ops applies it at establishment and on
// the next RTT sample of live sockets; a capped CUBIC socket is moved to the
// lanes congestion control, which brings cwnd under the cap on its next ACK.
func (c *Caps) SetLaneCwndCap(l lane.Lane, segs uint32) error {
	if _, err := laneValue(l); err != nil {
		return err
	}
	return c.guard.use(func() error {
		if c.ops == nil {
			return errNoSockops
		}
		if err := c.ops.LanesLaneCap.Put(uint32(l), segs); err != nil {
			return fmt.Errorf("cwnd cap of %s: %w", l, err)
		}
		return nil
	})
}

// SetSocketCwndCap caps one socket's congestion window (segments); 0 removes
// the socket's own cap, so its lane's cap (if any) applies again.
func (c *Caps) SetSocketCwndCap(cookie uint64, segs uint32) error {
	return c.guard.use(func() error {
		if c.ops == nil {
			return errNoSockops
		}
		if segs == 0 {
			return ignoreNotExist(c.ops.LanesSockCap.Delete(cookie), "remove socket cwnd cap")
		}
		if !c.seen.sockSeen(cookie) {
			return fmt.Errorf("cwnd cap of socket %d: %w", cookie, ErrSocketUnmanaged)
		}
		if err := c.ops.LanesSockCap.Put(cookie, segs); err != nil {
			return fmt.Errorf("cwnd cap of socket %d: %w", cookie, err)
		}
		if !c.seen.sockSeen(cookie) { // closed since the check: its close ran before the write
			return ignoreNotExist(c.ops.LanesSockCap.Delete(cookie), "remove a closed socket's cwnd cap")
		}
		return nil
	})
}

// CapCCStatus says whether the lanes congestion control (CUBIC with an
// enforced cwnd clamp) is registered, under which name, and if not why.
type CapCCStatus struct {
	Active     bool   `json:"active"`
	Name       string `json:"name,omitempty"`       // kernel congestion control name
	Registered string `json:"registered,omitempty"` // "bpf_link" or "map update" (structops)
	Reason     string `json:"reason,omitempty"`     // why it is not active
}

// CapCC reports the state of the lanes congestion control of this host.
func (c *Caps) CapCC() CapCCStatus {
	var s CapCCStatus
	err := c.guard.use(func() error {
		if c.cc == nil {
			s.Reason = cmp.Or(c.off[CapCapCC], "not loaded")
			return nil
		}
		s = CapCCStatus{Active: true, Name: c.cc.Name, Registered: c.cc.Mode.String()}
		return nil
	})
	if err != nil {
		return CapCCStatus{Reason: err.Error()}
	}
	return s
}
