// appcc.go reads what the monitor shows of a socket's congestion control
// beyond the kernel's name for it: the one the app of a background socket
// asked for and did not get (it keeps LEDBAT++, cgroup/setsockopt in
// sock_ops, lanes_app_cc by cookie), and what lanes' own congestion
// controls are (their kernel names are hashes: "lanes_1a2b3c4d").
package datapath

import "golang.org/x/sys/unix"

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
func (h *Host) OwnCCs() map[string]string {
	out := map[string]string{}
	_ = h.guard.use(func() error {
		if h.bg != nil {
			out[h.bg.Name] = CCNameLEDBAT
		}
		if h.cc != nil {
			out[h.cc.Name] = CCNameCapCC
		}
		return nil
	})
	return out
}
