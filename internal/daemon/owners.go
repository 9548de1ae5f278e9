// owners.go: answers "who owns these sockets / this process" from /proc,
// for the API's authorization (anyone may demote their own flows and
// processes to background, and no one else's), and resolves the access
// group's name. Group membership itself comes from the caller's
// credentials at connect (apiserver.Cred), not from here.
package daemon

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/lanes-net/lanes/internal/api"
)

// procOwners implements apiserver.Owners for the daemon's own network namespace.
type procOwners struct {
	proc string // "/proc" (tests may point elsewhere)
}

// FlowOwners returns the uids of every local socket matching the flow
// (protocol, local address if given, ports, destination), from
// /proc/net/{tcp,tcp6,udp,udp6}.
//
// A UDP flow's datagrams may also leave from an unconnected socket bound to
// the same local port (SO_REUSEADDR or SO_REUSEPORT sharers): it sends to
// any destination, so its owner is an owner of the flow too, else a user
// who shares root's port could register the tuple and take root's
// datagrams to that peer.
func (o procOwners) FlowOwners(f api.Flow) ([]uint32, error) {
	tab, err := o.tableOf(protoOf(f))
	if err != nil {
		return nil, err
	}
	return tab.owners(f)
}

// owners returns the uids of f's sockets in the table (FlowOwners).
func (tab sockTable) owners(f api.Flow) ([]uint32, error) {
	socks := tab.match(f)
	if len(socks) == 0 {
		return nil, fmt.Errorf("no local %s socket %s", protoOf(f), f)
	}
	if protoOf(f) == "udp" {
		socks = append(socks, tab.unconnected(f)...)
	}
	uids := make([]uint32, len(socks))
	for i, s := range socks {
		uids[i] = s.uid
	}
	return uids, nil
}

// unconnected returns the unconnected sockets on f's local port that can
// send from f's local address (bound to it, or to any address).
func (t sockTable) unconnected(f api.Flow) []procSocket {
	src, _ := netip.ParseAddr(f.Src)
	var out []procSocket
	for _, any := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		for _, s := range t[sockKey{protoOf(f), netip.AddrPortFrom(any, 0), f.SPort}] {
			if l := s.local.Addr().Unmap(); !src.IsValid() || l.IsUnspecified() || l == src.Unmap() {
				out = append(out, s)
			}
		}
	}
	return out
}

func protoOf(f api.Flow) string {
	if f.Proto == "" {
		return "tcp"
	}
	return f.Proto
}

// localAddrs returns the local address of each open socket matching f.
func (o procOwners) localAddrs(f api.Flow) ([]netip.Addr, error) {
	socks, err := o.socketsOf(f)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(socks))
	for i, s := range socks {
		out[i] = s.local.Addr()
	}
	return out, nil
}

// procSocket is one line of a /proc/net table.
type procSocket struct {
	local, remote netip.AddrPort
	state         uint8
	uid           uint32
	inode         uint64 // 0 for TIME_WAIT and other sockets without a file
}

// socketsOf returns the open sockets matching f (TIME_WAIT excluded).
func (o procOwners) socketsOf(f api.Flow) ([]procSocket, error) {
	tab, err := o.tableOf(protoOf(f))
	if err != nil {
		return nil, err
	}
	return tab.match(f), nil
}

// sockTable is the open sockets of the namespace by (proto, destination,
// local port).
type sockTable map[sockKey][]procSocket

type sockKey struct {
	proto string
	dst   netip.AddrPort
	sport uint16
}

// table reads every TCP and UDP socket once (the registration sweep).
func (o procOwners) table() (sockTable, error) {
	tab := sockTable{}
	for _, proto := range []string{"tcp", "udp"} {
		if err := o.readTable(tab, proto); err != nil {
			return nil, err
		}
	}
	return tab, nil
}

func (o procOwners) tableOf(proto string) (sockTable, error) {
	tab := sockTable{}
	return tab, o.readTable(tab, proto)
}

func (o procOwners) readTable(tab sockTable, proto string) error {
	for _, file := range []string{proto, proto + "6"} {
		err := scanSockets(o.proc+"/net/"+file, func(s procSocket) {
			if s.inode == 0 {
				return
			}
			k := sockKey{proto, netip.AddrPortFrom(s.remote.Addr().Unmap(), s.remote.Port()), s.local.Port()}
			tab[k] = append(tab[k], s)
		})
		if err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// match returns the sockets of f: its protocol, ports and destination, and
// its local address if it names one.
func (t sockTable) match(f api.Flow) []procSocket {
	dst, err := netip.ParseAddr(f.Dst)
	if err != nil {
		return nil
	}
	src, _ := netip.ParseAddr(f.Src)
	var out []procSocket
	for _, s := range t[sockKey{protoOf(f), netip.AddrPortFrom(dst.Unmap(), f.DPort), f.SPort}] {
		if !src.IsValid() || s.local.Addr().Unmap() == src.Unmap() {
			out = append(out, s)
		}
	}
	return out
}

// scanSockets calls fn for each socket of one /proc/net table.
// Columns: sl local rem st tx:rx tr:when retrnsmt uid timeout inode.
func scanSockets(path string, fn func(procSocket)) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		la, lp, err1 := parseProcAddr(fields[1])
		ra, rp, err2 := parseProcAddr(fields[2])
		st, err3 := strconv.ParseUint(fields[3], 16, 8)
		uid, err4 := strconv.ParseUint(fields[7], 10, 32)
		ino, err5 := strconv.ParseUint(fields[9], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
			continue
		}
		fn(procSocket{local: netip.AddrPortFrom(la, lp), remote: netip.AddrPortFrom(ra, rp), state: uint8(st), uid: uint32(uid), inode: ino})
	}
	return sc.Err()
}

// parseProcAddr decodes "0100007F:1F90" (IPv4) or the 32-hex-digit IPv6 form;
// addresses are in host byte order per 32-bit word.
func parseProcAddr(s string) (netip.Addr, uint16, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is little-endian
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr, uint16(port), nil
}

// LanesProcess says whether pid names (a thread of) the daemon or a
// process whose parent is the daemon (lanes-rtd).
func (o procOwners) LanesProcess(pid int) bool {
	tg, err := statusIDs(fmt.Sprintf("%s/%d/status", o.proc, pid), "Tgid:")
	if err != nil || len(tg) == 0 {
		return false
	}
	if int(tg[0]) == os.Getpid() {
		return true
	}
	pp, err := statusIDs(fmt.Sprintf("%s/%d/status", o.proc, tg[0]), "PPid:")
	return err == nil && len(pp) > 0 && int(pp[0]) == os.Getpid()
}

// ProcessOwner returns the real uid of the process pid names, from
// /proc/PID/status. pid may name a thread, and a move takes its whole
// thread group, whose threads may have credentials of their own (a raw
// setresuid changes one thread): so the owner is the uid every thread of
// the group shares, and a group whose threads differ has none.
func (o procOwners) ProcessOwner(pid int) (uint32, error) {
	tg, err := statusIDs(fmt.Sprintf("%s/%d/status", o.proc, pid), "Tgid:")
	if err != nil || len(tg) == 0 {
		return 0, fmt.Errorf("process %d: %v", pid, err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("%s/%d/task", o.proc, tg[0]))
	if err != nil {
		return 0, fmt.Errorf("process %d: %v", pid, err)
	}
	owner, found := uint32(0), false
	for _, task := range tasks {
		ids, err := statusIDs(fmt.Sprintf("%s/%d/task/%s/status", o.proc, tg[0], task.Name()), "Uid:")
		if err != nil || len(ids) == 0 {
			continue // a thread that ended meanwhile
		}
		if found && ids[0] != owner {
			return 0, fmt.Errorf("process %d: its threads belong to uids %d and %d", tg[0], owner, ids[0])
		}
		owner, found = ids[0], true
	}
	if !found {
		return 0, fmt.Errorf("process %d: no threads", pid)
	}
	return owner, nil
}

// GroupID resolves a group name (the policy's access group).
func (o procOwners) GroupID(name string) (uint32, bool) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, false
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(gid), err == nil
}

func statusIDs(path, key string) ([]uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			var out []uint32
			for _, f := range strings.Fields(rest) {
				v, err := strconv.ParseUint(f, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("%s: bad %s %q", path, key, f)
				}
				out = append(out, uint32(v))
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: no %s line", path, key)
}
