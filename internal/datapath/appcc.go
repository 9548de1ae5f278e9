// appcc.go reads what the monitor shows of a socket's congestion control
// beyond the kernel's name for it: the one the app of a background socket
// asked for and did not get (it keeps LEDBAT++, cgroup/setsockopt in
// sock_ops, lanes_app_cc by cookie), and what lanes' own congestion
// controls are (their kernel names are hashes: "lanes_1a2b3c4d").
package datapath

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
)

// CongestionControls is the host's own congestion controls as status and
// the monitor see them: which run, under which kernel names, and why
// not (BackgroundCC in bgcc.go; the cap-enforcing one's is Caps.CapCC).
type CongestionControls struct {
	guard    *guard
	bg       *ledbat.CC            // the background lane's LEDBAT++, nil if off
	cc       *capcc.CC             // the cap-enforcing one, nil if off
	off      map[Capability]string // why capabilities are off (set at open)
	sockops  bool                  // a sock_ops program runs (lanes' own or the pinned one)
	bgTarget time.Duration         // HostConfig.BackgroundTarget
}

// Names of lanes' congestion controls as OwnCCs reports them.
const (
	CCNameLEDBAT = "ledbat" // the background lane's LEDBAT++
	CCNameCapCC  = "capcc"  // CUBIC with the cooperative cwnd cap enforced
)

// SocketAppCC returns the congestion control the app of a background
// socket asked for with setsockopt(TCP_CONGESTION) after the socket was
// switched to LEDBAT++ (the socket runs LEDBAT++ still); false when it
// asked for none, or the capability is off.
func (p *CgroupPrograms) SocketAppCC(cookie uint64) (string, bool) {
	var v [16]byte
	err := p.guard.use(func() error {
		if p.ops == nil {
			return errClosed
		}
		return p.ops.LanesAppCc.Lookup(cookie, &v)
	})
	if err != nil || v[0] == 0 {
		return "", false
	}
	return unix.ByteSliceToString(v[:]), true
}

// OwnCCs maps the kernel names of this host's congestion controls to
// what they are (CCNameLEDBAT, CCNameCapCC); empty where none is loaded.
func (c *CongestionControls) OwnCCs() map[string]string {
	out := map[string]string{}
	_ = c.guard.use(func() error {
		if c.bg != nil {
			out[c.bg.Name] = CCNameLEDBAT
		}
		if c.cc != nil {
			out[c.cc.Name] = CCNameCapCC
		}
		return nil
	})
	return out
}

// SyncCCAllowList reads net.ipv4.tcp_allowed_congestion_control again into
// the list cgroup/setsockopt checks an app's TCP_CONGESTION against on a
// background socket (read at start, at each write of the sysctl or every
// 5 s: ccfollow.go, and at a reload). Without sock_ops there is no list:
// nil.
func (p *CgroupPrograms) SyncCCAllowList() error {
	p.ccMu.Lock() // a later reading is never overwritten by an earlier one
	defer p.ccMu.Unlock()
	return p.guard.use(func() error {
		if p.ops == nil {
			return nil
		}
		return p.ops.SyncAllowedCC()
	})
}
