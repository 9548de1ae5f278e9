// viewer.go: who is asking. The flows' pids and process names (comm) are
// other users' business: a client sees them for its own uid's flows, and
// for every flow only if it is root or Config.SeesAll says so (the
// policy's access group). A client is known by its loopback TCP
// connection's owner (/proc/net/tcp{,6}: the socket whose local end is the
// request's remote address); a client off loopback, or one not found, is
// nobody's and sees no pid or comm. Before, the page showed every user's
// pid and comm to any local user.
package dashboard

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// viewerKey is the context key of a request's viewer (its connection's).
type viewerKey struct{}

// viewer is who a connection belongs to.
type viewer struct {
	uid   uint32
	known bool
}

// connViewer is http.Server's ConnContext, run by the accept loop: it
// only notes the connection; its viewer is looked up at its first
// request (a connection that sends none costs no lookup).
func (s *Server) connViewer(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, viewerKey{}, &connOwner{local: c.LocalAddr(), remote: c.RemoteAddr()})
}

// connOwner is a connection's viewer, looked up once.
type connOwner struct {
	local, remote net.Addr
	once          sync.Once
	v             viewer
}

func (o *connOwner) viewer() viewer {
	o.once.Do(func() { o.v = lookupViewer(o.local, o.remote) })
	return o.v
}

// lookupViewer is the owner of a loopback client's socket.
func lookupViewer(localAddr, remoteAddr net.Addr) viewer {
	var v viewer
	if localAddr == nil || remoteAddr == nil {
		return v
	}
	local, lerr := netip.ParseAddrPort(localAddr.String())
	remote, rerr := netip.ParseAddrPort(remoteAddr.String())
	if lerr == nil && rerr == nil && remote.Addr().Unmap().IsLoopback() {
		v.uid, v.known = socketOwner(remote, local)
	}
	return v
}

// seesAll: may the request's viewer see every flow's pid and comm? A
// request served without HTTPServer's ConnContext is looked up by itself.
func (s *Server) seesAll(r *http.Request) (viewer, bool) {
	var v viewer
	if o, ok := r.Context().Value(viewerKey{}).(*connOwner); ok {
		v = o.viewer()
	} else {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		remote, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
		if err == nil {
			v = lookupViewer(local, remote)
		}
	}
	if !v.known {
		return v, false
	}
	return v, v.uid == 0 || (s.cfg.SeesAll != nil && s.cfg.SeesAll(v.uid))
}

// redact clears the pid and comm of the flows not v's.
func redact(snap Snapshot, v viewer) Snapshot {
	flows := make([]FlowView, len(snap.Flows))
	for i, f := range snap.Flows {
		if !v.known || f.uid != v.uid {
			f.PID, f.Comm = 0, ""
		}
		flows[i] = f
	}
	snap.Flows = flows
	for i := range snap.UDPFlows {
		if f := &snap.UDPFlows[i]; !v.known || f.UID != v.uid {
			f.PID, f.Comm = 0, ""
		}
	}
	return snap
}

// socketOwner is the uid owning the TCP socket whose local end is local
// and remote end remote, from this process's namespace's /proc/net/tcp
// and tcp6 (an IPv4 client of an IPv6 listener shows there mapped).
func socketOwner(local, remote netip.AddrPort) (uint32, bool) {
	if local.Addr().Is4() {
		if uid, ok := ownerIn("/proc/self/net/tcp", procAddr(local), procAddr(remote)); ok {
			return uid, true
		}
	}
	return ownerIn("/proc/self/net/tcp6", procAddr(mapped(local)), procAddr(mapped(remote)))
}

// mapped is a as IPv6 (IPv4-mapped if it is IPv4).
func mapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
}

// procAddr is a in /proc/net/tcp's form: the address's 32-bit words in
// host order, in hex, then the port.
func procAddr(a netip.AddrPort) string {
	var b strings.Builder
	if a.Addr().Is4() {
		ip := a.Addr().As4()
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[:]))
	} else {
		ip := a.Addr().As16()
		for i := 0; i < 16; i += 4 {
			fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
		}
	}
	fmt.Fprintf(&b, ":%04X", a.Port())
	return b.String()
}

// ownerIn finds the socket local -> remote in a /proc/net/tcp file.
func ownerIn(file, local, remote string) (uint32, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) > 7 && fs[1] == local && fs[2] == remote {
			uid, err := strconv.ParseUint(fs[7], 10, 32)
			return uint32(uid), err == nil
		}
	}
	return 0, false
}
