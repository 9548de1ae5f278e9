// livemove.go: a process's open sockets follow it into its new lane. A
// socket's cgroup is fixed when it is created, and sock_ops resolves a TCP
// socket's lane once, at connect or accept; so moving a process's cgroup
// (`lanes move`, a process rule, a cgroup rule) would reach only the
// sockets it opens later. Here every lane change of processes also sets
// the lane of the sockets they hold now, by socket cookie (the classifier's
// first lookup, for TCP and UDP alike):
//
//   - find: the socket inodes the processes hold (/proc/PID/fd, only the
//     moved processes are read) matched against one sock_diag dump of the
//     namespace's TCP and UDP sockets (cookie, inode, uid, cgroup);
//   - set: lanes_cookie[cookie] = the lane. The classifier steers the next
//     packet by it. The congestion control goes at once where an iter/tcp
//     program may call bpf_setsockopt (5.14+, datapath live_cc): LEDBAT++
//     and TCP_NOTSENT_LOWAT into background, the socket's own congestion
//     control (what its app asked for, else what it ran before) and the
//     default TCP_NOTSENT_LOWAT out of it; elsewhere, and for the rest (the
//     lane's cwnd cap, rLEDBAT's window released at the next segment),
//     sock_ops at the socket's next RTT sample (an ACK);
//   - UDP out of background: its flows leave the background class's flow
//     table, so that their arriving packets are no longer policed.
//
// A uid or cgroup rule that a reload adds, changes or removes reaches the
// open sockets of that uid or cgroup the same way (followRulesLocked).
//
// Note: a socket shared by several processes (inherited over fork, passed
// over a unix socket) follows the last of them that changed lane: each move
// sets the lane of every socket the moved processes hold.
package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// openSock is one socket of the daemon's namespace as sock_diag shows it.
type openSock struct {
	cookie uint64
	proto  uint8 // unix.IPPROTO_TCP or IPPROTO_UDP
	inode  uint32
	uid    uint32
	cgroup uint64
	src    netip.AddrPort
	dst    netip.AddrPort
	tos    uint8
	listen bool
}

const tcpListen = 10 // TCP_LISTEN

// errNoUDPDiag: the namespace's UDP sockets cannot be dumped (no udp_diag:
// CONFIG_INET_UDP_DIAG off, or its module not loaded where modules cannot
// be): dumpOpenSockets returns the TCP sockets with it, and open UDP
// sockets keep their lane until they close.
var errNoUDPDiag = errors.New("no UDP sock_diag (udp_diag): open UDP sockets stay in their lane")

// dumpOpenSockets lists the namespace's TCP and UDP sockets (the TCP ones
// alone, with errNoUDPDiag, where UDP's cannot be dumped).
func dumpOpenSockets() ([]openSock, error) {
	var out []openSock
	for _, proto := range []uint8{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		err := tcpmon.DumpSocketIDs(proto, func(s *tcpmon.Sock) {
			if s.Cookie == 0 || s.Inode == 0 {
				return // a time-wait or request socket: no descriptor, nothing to move
			}
			out = append(out, openSock{cookie: s.Cookie, proto: proto, inode: s.Inode, uid: s.UID, cgroup: s.CgroupID,
				src: s.Src, dst: s.Dst, tos: s.DSCP() << 2, listen: proto == unix.IPPROTO_TCP && s.State == tcpListen})
		})
		if err != nil && proto == unix.IPPROTO_UDP {
			return out, fmt.Errorf("%w: sock_diag: %v", errNoUDPDiag, err)
		}
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
	}
	return out, nil
}

// dumpReuse is how long a listing of the namespace's sockets serves the
// moves that root did not ask for (a socket opened since keeps its lane).
const dumpReuse = time.Second

// sockDump is the last listing of the namespace's sockets, by inode and by
// tuple, for moves and registrations not asked by root and for the
// registration sweep.
type sockDump struct {
	mu      sync.Mutex
	at      time.Time
	byInode map[uint32]openSock
	byKey   map[sockKey][]openSock // by protocol, destination and local port
	err     error
}

// find returns the listed sockets of these inodes. It lists the namespace
// again (dump) only when one of them is not in the listing and the listing
// is over dumpReuse old: a process moved again and again holds the sockets
// it held, and listing 19,000 sockets for it each second was a third of
// its moves' cost. An inode is a socket's while it is open, so a listed
// socket that a process still holds is that socket.
func (c *sockDump) find(inodes map[uint32]bool, dump func() ([]openSock, error)) ([]openSock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, missing := c.lookup(inodes)
	if missing && c.stale() {
		c.relist(dump)
		out, _ = c.lookup(inodes)
	}
	return out, c.err
}

// flowInodes returns the inodes of the listed sockets of flow f (its
// protocol, ports, destination, and local address if it names one). It
// lists again only when none is listed and the listing is over dumpReuse
// old: a member's loop registering socketless flows beside 19,000 UDP
// sockets read /proc/net/udp twice per request under the daemon's lock,
// 40.6 % of a core, and root's status p99 was 1.2 s.
func (c *sockDump) flowInodes(f api.Flow, dump func() ([]openSock, error)) map[uint64]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.matchFlow(f)
	if len(out) == 0 && c.stale() {
		c.relist(dump)
		out = c.matchFlow(f)
	}
	return out
}

func (c *sockDump) matchFlow(f api.Flow) map[uint64]bool {
	dst, err := netip.ParseAddr(f.Dst)
	if err != nil {
		return nil
	}
	src, _ := netip.ParseAddr(f.Src)
	out := map[uint64]bool{}
	for _, s := range c.byKey[sockKey{protoOf(f), netip.AddrPortFrom(dst.Unmap(), f.DPort), f.SPort}] {
		if !src.IsValid() || s.src.Addr().Unmap() == src.Unmap() {
			out[uint64(s.inode)] = true
		}
	}
	return out
}

// table returns the listing as a socket table (the registration sweep),
// listed again if over dumpReuse old; an error where sock_diag lists no
// UDP sockets or none at all.
func (c *sockDump) table(dump func() ([]openSock, error)) (sockTable, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale() {
		c.relist(dump)
	}
	if c.err != nil {
		return nil, c.err
	}
	tab := make(sockTable, len(c.byKey))
	for k, socks := range c.byKey {
		for _, s := range socks {
			tab[k] = append(tab[k], procSocket{local: s.src, remote: s.dst, uid: s.uid, inode: uint64(s.inode)})
		}
	}
	return tab, nil
}

func (c *sockDump) stale() bool { return c.at.IsZero() || time.Since(c.at) > dumpReuse }

// relist lists the namespace's sockets again (c.mu held).
func (c *sockDump) relist(dump func() ([]openSock, error)) {
	var all []openSock
	all, c.err = dump()
	c.at = time.Now()
	c.byInode = make(map[uint32]openSock, len(all))
	c.byKey = make(map[sockKey][]openSock, len(all))
	for _, s := range all {
		c.byInode[s.inode] = s
		proto := "tcp"
		if s.proto == unix.IPPROTO_UDP {
			proto = "udp"
		}
		k := sockKey{proto, netip.AddrPortFrom(s.dst.Addr().Unmap(), s.dst.Port()), s.src.Port()}
		c.byKey[k] = append(c.byKey[k], s)
	}
}

// lookup returns the listed sockets of inodes and whether one is not
// listed, or was listed as a UDP socket with no port yet (its port, which
// its flows leave background by, comes with its first connect or send).
func (c *sockDump) lookup(inodes map[uint32]bool) (out []openSock, missing bool) {
	for ino := range inodes {
		s, ok := c.byInode[ino]
		if ok {
			out = append(out, s)
		}
		missing = missing || !ok || s.proto == unix.IPPROTO_UDP && s.src.Port() == 0
	}
	return out, missing
}

// Bounds of a move's work (N15: a process holding 19,000 UDP sockets that
// moved itself 4 times a second held the daemon's lock 261 ms a move, the
// daemon at 98.7 % of a core and root's status p99 at 103 ms).
const (
	// maxMoveSockets: the sockets a move that root did not ask for takes
	// along (its others keep their lane; new ones follow the cgroup).
	maxMoveSockets = 1024
	// moveChunk: the sockets set under one hold of the daemon's lock.
	moveChunk = 256
)

// socketInodes adds the inodes of the sockets pid holds to set, at most
// limit in all (0: no limit; then also at most 4 x limit descriptors read).
// The descriptors are read in directory order, a batch at a time, and not
// sorted: a bounded move of a process holding 19,000 sockets read and
// sorted all 19,000 names, most of its cost.
func socketInodes(pid int, set map[uint32]bool, limit int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	f, err := os.Open(dir)
	if err != nil {
		return // gone, or a kernel thread
	}
	defer f.Close()
	for read := 0; limit == 0 || (len(set) < limit && read < 4*limit); {
		names, err := f.Readdirnames(fdBatch)
		for _, name := range names {
			if limit > 0 && (len(set) >= limit || read >= 4*limit) {
				return
			}
			read++
			if ino, ok := socketInode(filepath.Join(dir, name)); ok {
				set[ino] = true
			}
		}
		if err != nil || len(names) == 0 {
			return
		}
	}
}

// fdBatch: the descriptors socketInodes reads at a time.
const fdBatch = 256

// socketInode is the inode of the socket the descriptor link fd names.
func socketInode(fd string) (uint32, bool) {
	t, err := os.Readlink(fd)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(t, "socket:[")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 32)
	return uint32(ino), err == nil
}

// socketsOfPIDs are the open TCP and UDP sockets the processes hold (at
// most limit of them; 0: all). A move not asked by root (limit > 0) uses
// the listing of sockDump.find: the listing of a namespace's 19,000
// sockets was most of such a move's cost.
func (mv *laneMover) socketsOfPIDs(pids []int, limit int) ([]openSock, error) {
	inodes := map[uint32]bool{}
	for _, pid := range pids {
		socketInodes(pid, inodes, limit)
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	var all []openSock
	var err error
	if limit > 0 {
		all, err = mv.moves.userDump.find(inodes, mv.env.openSockets)
	} else {
		all, err = mv.env.openSockets()
	}
	if errors.Is(err, errNoUDPDiag) {
		mv.log.Warn("moved processes: only their TCP sockets follow", "err", err)
	} else if err != nil {
		return nil, err
	}
	var out []openSock
	for _, s := range all {
		if inodes[s.inode] {
			out = append(out, s)
		}
	}
	return out, nil
}

// moveSockets puts the open sockets of pids in lane l and says how many
// of each protocol moved; by is what asked. A move that root did not ask
// for leaves the sockets of root's registrations alone (nobody's move of its own process
// to background put a flow root had registered realtime on LEDBAT++,
// while its why still said "registration (api)"), and takes at most
// maxMoveSockets. The lock is held for moveChunk sockets at a time.
func (mv *laneMover) moveSockets(pids []int, l lane.Lane, by string, byRoot bool) (tcp, udp int, err error) {
	limit := 0
	if !byRoot {
		limit = maxMoveSockets
	}
	socks, err := mv.socketsOfPIDs(pids, limit)
	if err != nil {
		return 0, 0, err
	}
	for start := 0; start < len(socks); start += moveChunk {
		t, u := mv.moveSocketsChunk(socks[start:min(len(socks), start+moveChunk)], l, by, byRoot)
		tcp, udp = tcp+t, udp+u
	}
	if len(socks) > 0 {
		mv.regs.kickSweep()
	}
	return tcp, udp, nil
}

// movedSock is the lane a process move gave an open socket, and what moved
// it ("lanes move", "lanes run", "rule wget-bg (exe)"): the why people see.
type movedSock struct {
	lane lane.Lane
	by   string
}

// why is what status and monitor say decided the socket's lane.
func (m movedSock) why() string { return fmt.Sprintf("%s: process moved to %s", m.by, m.lane) }

// moveSocketsChunk is one hold of the daemon's lock of moveSockets.
func (mv *laneMover) moveSocketsChunk(socks []openSock, l lane.Lane, by string, byRoot bool) (tcp, udp int) {
	mv.kernel.mu.Lock()
	defer mv.kernel.mu.Unlock()
	if !byRoot {
		socks = mv.regs.withoutRootHeld(socks)
	}
	tcp, udp = mv.kernel.setSocketsLaneLocked(socks, l)
	mv.moves.setSockets(socks, movedSock{lane: l, by: by})
	return tcp, udp
}

// liveApplier applies moved TCP sockets' congestion control at once
// (datapath livecc.go); false: their next ACK will.
type liveApplier interface {
	ApplyLive(moved map[uint64]lane.Lane) (bool, error)
}

// bgFlowForgetter is the host datapath's background flow table.
type bgFlowForgetter interface {
	ForgetBackgroundFlows(proto uint8, sports map[uint16]bool) (int, error)
}

// setSocketsLaneLocked sets the lane of socks by cookie (kernel.mu held); it
// counts the sockets in lane l afterwards per protocol. A socket already
// in l by cookie costs one lookup: its congestion control was applied when
// it was set. A listening socket is set too (its own packets), though the
// connections it accepts later take the cgroup it was created in.
func (ks *kernelState) setSocketsLaneLocked(socks []openSock, l lane.Lane) (tcp, udp int) {
	if ks.host == nil {
		return 0, 0
	}
	live := map[uint64]lane.Lane{}
	leftBg := map[uint16]bool{} // UDP sockets' ports out of background
	for _, s := range socks {
		prev, _ := ks.host.sockets.SocketLane(s.cookie)
		if prev != l { // in the lane already: nothing to write
			if err := ks.host.sockets.SetSocketLane(s.cookie, l); err != nil {
				ks.log.Debug("open socket lane", "cookie", s.cookie, "lane", l, "err", err)
				continue
			}
			if s.proto != unix.IPPROTO_UDP {
				live[s.cookie] = l
			} else if prev == lane.Background {
				leftBg[s.src.Port()] = true
			}
		}
		if s.proto == unix.IPPROTO_UDP {
			udp++
		} else {
			tcp++
		}
	}
	if f := ks.host.roles().bgFlows; f != nil && len(leftBg) > 0 {
		if _, err := f.ForgetBackgroundFlows(unix.IPPROTO_UDP, leftBg); err != nil {
			ks.log.Debug("background flows", "sports", len(leftBg), "err", err)
		}
	}
	if a := ks.host.roles().liveCC; a != nil && len(live) > 0 {
		if _, err := a.ApplyLive(live); err != nil {
			ks.log.Warn("moved sockets: congestion control left to their next ACK", "err", err)
		}
	}
	return tcp, udp
}

// exeLaner is the host datapath's lanes decided at exec (datapath execlane.go).
type exeLaner interface {
	SetExeLanes(exes map[string]lane.Lane) error
}

// setExeLanesLocked gives the datapath the exe: rules it can decide at exec:
// an absolute path and no other condition (kernel.mu held). The others act
// through the task engine's move alone.
func (ks *kernelState) setExeLanesLocked() {
	x := ks.host.roles().exeLanes
	if x == nil {
		return
	}
	exes := map[string]lane.Lane{}
	for _, r := range ks.pol.Rules {
		if filepath.IsAbs(r.Exe) && r.Comm == "" && r.UID == nil && r.Cgroup == "" {
			exes[r.Exe] = r.Lane
		}
	}
	if err := x.SetExeLanes(exes); err != nil {
		ks.log.Warn("exe: rules at exec: their processes follow when the task engine moves them", "err", err)
	}
}
