// diagowners.go: the owners and local addresses of a flow's sockets for
// callers other than root, from sock_diag asked for the flow's local port
// instead of /proc/net's text tables.
package daemon

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// diagOwners answers FlowOwners from sock_diag and the rest of
// apiserver.Owners from /proc. An unprivileged register read the whole of
// /proc/net/udp twice (its owners, its local address): beside 19,000 UDP
// sockets that was most of its cost. The kernel now filters the sockets by
// the flow's local port and answers with those alone, read at the request
// (a listing kept for a second could miss a socket another user opened
// since on the port).
type diagOwners struct {
	procOwners
	// portSockets lists the sockets of a protocol on one local port (and
	// may list others); nil: tcpmon.DumpPortSocketIDs.
	portSockets func(proto uint8, port uint16) ([]openSock, error)
}

// FlowOwners returns the uids of flow f's sockets and, for UDP, of the
// unconnected sockets that can send as f (from /proc without sock_diag).
func (o diagOwners) FlowOwners(f api.Flow) ([]uint32, error) {
	tab, err := o.portTable(f)
	if err != nil {
		return o.procOwners.FlowOwners(f)
	}
	return tab.owners(f)
}

// localAddrs returns the local address of each open socket of f (from
// /proc without sock_diag).
func (o diagOwners) localAddrs(f api.Flow) ([]netip.Addr, error) {
	tab, err := o.portTable(f)
	if err != nil {
		return o.procOwners.localAddrs(f)
	}
	socks := tab.match(f)
	out := make([]netip.Addr, len(socks))
	for i, s := range socks {
		out[i] = s.local.Addr()
	}
	return out, nil
}

// portTable is the socket table of f's protocol and local port.
func (o diagOwners) portTable(f api.Flow) (sockTable, error) {
	proto, name := uint8(unix.IPPROTO_TCP), protoOf(f)
	if name == "udp" {
		proto = unix.IPPROTO_UDP
	}
	list := o.portSockets
	if list == nil {
		list = dumpPortSockets
	}
	socks, err := list(proto, f.SPort)
	if err != nil {
		return nil, err
	}
	tab := sockTable{}
	for _, s := range socks {
		if s.proto == proto && s.src.Port() == f.SPort {
			k := sockKey{name, netip.AddrPortFrom(s.dst.Addr().Unmap(), s.dst.Port()), s.src.Port()}
			tab[k] = append(tab[k], procSocket{local: s.src, remote: s.dst, uid: s.uid, inode: uint64(s.inode)})
		}
	}
	return tab, nil
}

func dumpPortSockets(proto uint8, port uint16) ([]openSock, error) {
	var out []openSock
	err := tcpmon.DumpPortSocketIDs(proto, port, func(s *tcpmon.Sock) {
		if s.Inode != 0 { // a time-wait or request socket has no file (as in /proc)
			out = append(out, openSock{proto: proto, inode: s.Inode, uid: s.UID, src: s.Src, dst: s.Dst})
		}
	})
	return out, err
}
