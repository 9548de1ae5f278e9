// diag.go: a minimal NETLINK_SOCK_DIAG client for TCP sockets, written
// against the uapi (linux/inet_diag.h, linux/sock_diag.h) the way ss does it.
//
// One dump request per sample (TCPDIAG_GETSOCK for both families in one
// hash walk, else SOCK_DIAG_BY_FAMILY per family) with NLM_F_DUMP, asking
// for INFO, SKMEMINFO and CONG, optionally with filter bytecode; the kernel
// answers with one inet_diag_msg plus attributes per socket, spread over
// several datagrams of at most 32 KiB, ended by NLMSG_DONE.
//
//   - openDiag      opens the netlink socket, inside a network namespace if
//     given (the socket stays bound to that namespace afterwards).
//   - (*diagConn).dumpAll  sends the request(s), falling back when the
//     kernel refuses one, and calls fn for every socket.
//   - parseDiagMsg  decodes one inet_diag_msg and its attributes (pure; unit
//     tested on crafted messages). MEMINFO, TOS, MARK, SHUTDOWN and
//     CGROUP_ID are decoded when present.
//   - diagFilter    compiles port and cgroup conditions to inet_diag bytecode.
//
// Note: sockets may vanish or appear while the kernel walks its hash tables;
// the dump then simply lacks or gains them, and the kernel may set
// NLM_F_DUMP_INTR. Neither is an error for a monitor: the next sample sees
// the new state. Unknown attributes are skipped by type, so newer kernels
// with more attributes are read fine.
package tcpmon

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

// Attribute types of an inet_diag_msg (enum in linux/inet_diag.h).
const (
	attrMeminfo   = 1
	attrInfo      = 2
	attrCong      = 4
	attrTOS       = 5
	attrTClass    = 6
	attrSKMeminfo = 7
	attrShutdown  = 8
	attrMark      = 15
	attrCgroupID  = 21
)

const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	tcpDiagGetSock   = 18 // TCPDIAG_GETSOCK, the original inet_diag request
	nlmsgHdrLen      = 16
	diagReqLen       = 56 // sizeof(struct inet_diag_req_v2)
	diagReqOldLen    = 60 // sizeof(struct inet_diag_req)
	diagMsgLen       = 72 // sizeof(struct inet_diag_msg)
)

// extensions asked for: tcp_info, socket memory, congestion control, and the
// socket's marking (IPv4 TOS, IPv6 traffic class: the classifier's DSCP).
const diagExt = 1<<(attrInfo-1) | 1<<(attrCong-1) | 1<<(attrSKMeminfo-1) | 1<<(attrTOS-1) | 1<<(attrTClass-1)

// markingExt: the marking alone (DumpSocketIDs).
const markingExt = 1<<(attrTOS-1) | 1<<(attrTClass-1)

// TCP states (include/net/tcp_states.h), as bits for idiag_states.
const (
	StateEstablished = 1
	StateSynSent     = 2
	StateSynRecv     = 3
	StateFinWait1    = 4
	StateFinWait2    = 5
	StateTimeWait    = 6
	StateClose       = 7
	StateCloseWait   = 8
	StateLastAck     = 9
	StateListen      = 10
	StateClosing     = 11
)

// ConnectedStates is the default idiag_states mask: every state of a
// connection that has a tcp_info worth reading (no LISTEN, no TIME_WAIT).
const ConnectedStates uint32 = 1<<StateEstablished | 1<<StateSynSent | 1<<StateSynRecv |
	1<<StateFinWait1 | 1<<StateFinWait2 | 1<<StateCloseWait | 1<<StateLastAck | 1<<StateClosing

var stateNames = [...]string{"", "ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2",
	"TIME-WAIT", "CLOSE", "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING", "NEW-SYN-RECV"}

// StateName is the ss-style name of a TCP state number.
func StateName(s uint8) string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return fmt.Sprintf("STATE-%d", s)
}

// Sock is one socket as the kernel describes it in a sock_diag answer.
type Sock struct {
	Family   uint8
	State    uint8
	Src, Dst netip.AddrPort
	IfIndex  uint32
	Cookie   uint64
	RQueue   uint32 // receive queue bytes (established: unread data)
	WQueue   uint32 // send queue bytes (established: unacked + unsent)
	UID      uint32
	Inode    uint32
	Info     TCPInfo // valid if HasInfo
	HasInfo  bool    // the kernel sent INET_DIAG_INFO
	Mem      [4]uint32
	HasMem   bool
	SKMem    [9]uint32 // SK_MEMINFO_* values
	NSKMem   int       // how many of them the kernel sent
	Cong     []byte    // congestion control name (aliases the receive buffer)
	TOS      uint8     // IPv4 TOS byte
	TClass   uint8     // IPv6 traffic class (AF_INET6 sockets)
	Mark     uint32
	CgroupID uint64
	Shutdown uint8
	// Lane, when HasLane: resolved by the BPF iterator from the daemon's
	// map (sock_diag leaves it to Config.LaneOf).
	Lane    lane.Lane
	HasLane bool
}

// DSCP is the marking of the socket's packets: the traffic class of an IPv6
// socket's IPv6 packets, else the TOS byte (IPv4, and IPv4-mapped peers).
func (s *Sock) DSCP() uint8 {
	if a := s.Dst.Addr(); a.Is6() && !a.Is4In6() {
		return s.TClass >> 2
	}
	return s.TOS >> 2
}

// parseDiagMsg decodes the payload of one SOCK_DIAG_BY_FAMILY message.
func parseDiagMsg(b []byte) (Sock, error) {
	var s Sock
	err := parseDiagMsgInto(b, &s)
	return s, err
}

// parseDiagMsgInto is parseDiagMsg into a reused Sock (no allocation).
func parseDiagMsgInto(b []byte, sp *Sock) error {
	*sp = Sock{}
	if len(b) < diagMsgLen {
		return fmt.Errorf("inet_diag_msg: %d bytes, want at least %d", len(b), diagMsgLen)
	}
	if err := parseDiagSockID(b, sp); err != nil {
		return err
	}
	return parseDiagAttrs(b[diagMsgLen:], sp)
}

// parseDiagSockID reads the fixed struct inet_diag_msg: family, state,
// the socket's addresses and cookie, its queues, uid and inode.
func parseDiagSockID(b []byte, s *Sock) error {
	ne := binary.NativeEndian
	s.Family = b[0]
	s.State = b[1]
	// struct inet_diag_sockid starts at 4: sport, dport (big endian), src[16], dst[16], if, cookie[2].
	sport := binary.BigEndian.Uint16(b[4:])
	dport := binary.BigEndian.Uint16(b[6:])
	switch s.Family {
	case unix.AF_INET:
		s.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[8:12])), sport)
		s.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[24:28])), dport)
	case unix.AF_INET6:
		s.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), sport)
		s.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[24:40])).Unmap(), dport)
	default:
		return fmt.Errorf("inet_diag_msg: unknown family %d", s.Family)
	}
	s.IfIndex = ne.Uint32(b[40:])
	s.Cookie = uint64(ne.Uint32(b[44:])) | uint64(ne.Uint32(b[48:]))<<32
	// then idiag_expires (52), rqueue, wqueue, uid, inode.
	s.RQueue = ne.Uint32(b[56:])
	s.WQueue = ne.Uint32(b[60:])
	s.UID = ne.Uint32(b[64:])
	s.Inode = ne.Uint32(b[68:])
	return nil
}

// parseDiagAttrs walks the netlink attributes after the fixed message.
func parseDiagAttrs(rest []byte, s *Sock) error {
	ne := binary.NativeEndian
	for len(rest) >= 4 {
		alen := int(ne.Uint16(rest[0:]))
		atype := ne.Uint16(rest[2:]) & 0x3fff // strip NLA_F_NESTED / NLA_F_NET_BYTEORDER
		if alen < 4 || alen > len(rest) {
			return fmt.Errorf("inet_diag_msg: attribute type %d has bad length %d (%d bytes left)", atype, alen, len(rest))
		}
		applyDiagAttr(atype, rest[4:alen], s)
		next := (alen + 3) &^ 3
		if next > len(rest) {
			break
		}
		rest = rest[next:]
	}
	return nil
}

// applyDiagAttr stores one attribute's value v in s; unknown or
// uninteresting attributes, and ones too short for their type, are skipped.
func applyDiagAttr(atype uint16, v []byte, s *Sock) {
	ne := binary.NativeEndian
	switch atype {
	case attrInfo:
		s.Info = ParseTCPInfo(v)
		s.HasInfo = true
	case attrMeminfo:
		if len(v) >= 16 {
			for i := range s.Mem {
				s.Mem[i] = ne.Uint32(v[4*i:])
			}
			s.HasMem = true
		}
	case attrSKMeminfo:
		s.NSKMem = min(len(v)/4, len(s.SKMem))
		for i := range s.NSKMem {
			s.SKMem[i] = ne.Uint32(v[4*i:])
		}
	case attrCong:
		s.Cong = cBytes(v)
	case attrTOS:
		if len(v) >= 1 {
			s.TOS = v[0]
		}
	case attrTClass:
		if len(v) >= 1 {
			s.TClass = v[0]
		}
	case attrMark:
		if len(v) >= 4 {
			s.Mark = ne.Uint32(v)
		}
	case attrCgroupID:
		if len(v) >= 8 {
			s.CgroupID = ne.Uint64(v)
		}
	case attrShutdown:
		if len(v) >= 1 {
			s.Shutdown = v[0]
		}
	}
}

func cBytes(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// diagConn is a NETLINK_SOCK_DIAG socket with its receive buffer.
type diagConn struct {
	fd    int
	seq   uint32
	proto uint8 // IPPROTO_*: 0 is TCP
	buf   []byte
	req   []byte
	sk    Sock
	// bytecode is an inet_diag filter program run by the kernel on each
	// socket before it fills the answer (see diagFilter); nil: none.
	bytecode []byte
	// noCompat is set once the one-walk TCPDIAG_GETSOCK request failed.
	noCompat bool
	// ext: the extensions asked for (0: diagExt).
	ext uint8
	// DumpIntr counts dumps the kernel marked NLM_F_DUMP_INTR (the socket
	// tables changed under the walk); BadMsgs counts undecodable messages.
	DumpIntr, BadMsgs uint64
	// BytecodeDropped: the kernel refused the filter bytecode.
	BytecodeDropped bool
}

// openDiag opens the netlink socket; if ns is a valid handle the socket is
// created inside that network namespace.
func openDiag(ns netns.NsHandle) (*diagConn, error) {
	mk := func() (int, error) {
		return unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	}
	var fd int
	var err error
	if ns.IsOpen() {
		fd, err = inNetNS(ns, mk)
	} else {
		fd, err = mk()
	}
	if err != nil {
		return nil, fmt.Errorf("open sock_diag netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind sock_diag netlink socket: %w", err)
	}
	// A larger socket buffer lets the kernel queue a whole datagram while we
	// parse the previous one; 32 KiB is the largest the dump ever sends.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	return &diagConn{fd: fd, buf: make([]byte, 64<<10), req: make([]byte, nlmsgHdrLen+diagReqOldLen, nlmsgHdrLen+diagReqOldLen+256)}, nil
}

// inNetNS runs fn on a locked OS thread switched into ns. If switching back
// fails the thread stays locked, so the runtime discards it with the goroutine.
func inNetNS[T any](ns netns.NsHandle, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var r result
		orig, err := netns.Get()
		if err != nil {
			r.err = fmt.Errorf("get current netns: %w", err)
			ch <- r
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			r.err = fmt.Errorf("enter netns: %w", err)
			ch <- r
			return
		}
		r.v, r.err = fn()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- r
	}()
	r := <-ch
	return r.v, r.err
}

func (c *diagConn) Close() error { return unix.Close(c.fd) }

// DumpSockets calls fn for every socket of protocol proto (IPPROTO_TCP or
// IPPROTO_UDP), IPv4 and IPv6, in the calling thread's network namespace,
// with its cookie, inode, uid and cgroup id (fn must not keep the *Sock).
// One walk per family: the daemon's live moves look sockets up by inode.
func DumpSockets(proto uint8, fn func(*Sock)) error {
	c, err := openDiag(netns.None())
	if err != nil {
		return err
	}
	defer c.Close()
	c.proto = proto
	c.noCompat = proto != unix.IPPROTO_TCP // TCPDIAG_GETSOCK is TCP's alone
	return c.dumpAll(0xfff, false, fn)
}

// DumpSocketIDs is DumpSockets without tcp_info, congestion control and
// socket memory: a socket's cookie, inode, uid, cgroup id, addresses,
// state and marking, for the daemon's live moves: the kernel fills no
// tcp_info or memory counters for each of a namespace's sockets.
func DumpSocketIDs(proto uint8, fn func(*Sock)) error {
	return dumpIDs(proto, nil, fn)
}

// DumpPortSocketIDs is DumpSocketIDs of the sockets on one local port:
// the kernel skips the others before it fills an answer (bytecode), so a
// look-up of one flow's sockets beside 19,000 others costs a walk of the
// table, not its listing. A kernel that refuses the bytecode lists all
// sockets: callers match the port themselves.
func DumpPortSocketIDs(proto uint8, localPort uint16, fn func(*Sock)) error {
	return dumpIDs(proto, diagFilter(localPort, 0, 0, 0), fn)
}

// dumpIDs lists proto's sockets without tcp_info or memory counters, those
// bytecode (nil: all) lets through.
func dumpIDs(proto uint8, bytecode []byte, fn func(*Sock)) error {
	c, err := openDiag(netns.None())
	if err != nil {
		return err
	}
	defer c.Close()
	c.proto = proto
	c.noCompat = proto != unix.IPPROTO_TCP
	c.ext = markingExt
	c.bytecode = bytecode
	return c.dumpAll(0xfff, false, fn)
}

// dumpAll asks for the TCP sockets of both address families in the states
// mask and calls fn for each (fn must not keep the *Sock).
//
// Note: the kernel walks its whole established hash table (global unless
// net.ipv4.tcp_child_ehash_entries gives namespaces their own) for every
// dump, so a SOCK_DIAG_BY_FAMILY request per family costs two walks. The
// original TCPDIAG_GETSOCK request dumps both families in one walk
// (inet_diag_dump_compat sets AF_UNSPEC); it is used when the kernel takes
// it, with the per-family requests as fallback.
func (c *diagConn) dumpAll(states uint32, ipv4Only bool, fn func(*Sock)) error {
	for {
		err := c.dumpOnce(states, ipv4Only, fn)
		if err == nil {
			return nil
		}
		refused := errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT)
		switch {
		case !refused:
			return err
		case c.bytecode != nil:
			// An older kernel without some bytecode op: filter in user space only.
			c.bytecode = nil
			c.BytecodeDropped = true
		case !c.noCompat && !ipv4Only:
			c.noCompat = true
		default:
			return err
		}
	}
}

func (c *diagConn) dumpOnce(states uint32, ipv4Only bool, fn func(*Sock)) error {
	if !c.noCompat && !ipv4Only {
		return c.dump(tcpDiagGetSock, unix.AF_INET, states, fn)
	}
	if err := c.dump(sockDiagByFamily, unix.AF_INET, states, fn); err != nil {
		return err
	}
	if ipv4Only {
		return nil
	}
	return c.dump(sockDiagByFamily, unix.AF_INET6, states, fn)
}

// dump sends one request (SOCK_DIAG_BY_FAMILY for family, or the old
// TCPDIAG_GETSOCK for all families) and reads the answer. Messages that do
// not decode are counted and skipped.
func (c *diagConn) dump(kind uint16, family uint8, states uint32, fn func(*Sock)) error {
	c.seq++
	ne := binary.NativeEndian
	r := c.req[:cap(c.req)]
	clear(r)
	r = r[:len(c.req)]
	ne.PutUint16(r[4:], kind)
	ne.PutUint16(r[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(r[8:], c.seq)
	q := r[nlmsgHdrLen:]
	var idOff int
	if kind == tcpDiagGetSock {
		// struct inet_diag_req: family, src_len, dst_len, ext, id, states, dbs.
		r = r[:nlmsgHdrLen+diagReqOldLen]
		q[0] = family
		q[3] = cmp.Or(c.ext, diagExt)
		idOff = 4
		ne.PutUint32(q[4+48:], states)
	} else {
		// struct inet_diag_req_v2: family, protocol, ext, pad, states, id.
		r = r[:nlmsgHdrLen+diagReqLen]
		q[0] = family
		q[1] = cmp.Or(c.proto, unix.IPPROTO_TCP)
		q[2] = cmp.Or(c.ext, diagExt)
		ne.PutUint32(q[4:], states)
		idOff = 8
	}
	ne.PutUint32(r[0:], uint32(len(r)))
	// Cookie "none": the kernel ignores the socket id in a dump, but ss sets it.
	ne.PutUint32(q[idOff+40:], ^uint32(0))
	ne.PutUint32(q[idOff+44:], ^uint32(0))
	if len(c.bytecode) > 0 {
		var a [4]byte
		ne.PutUint16(a[0:], uint16(4+len(c.bytecode)))
		ne.PutUint16(a[2:], inetDiagReqBytecode)
		r = append(append(r, a[:]...), c.bytecode...)
		ne.PutUint32(r[0:], uint32(len(r)))
	}
	if err := unix.Sendto(c.fd, r, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send sock_diag request: %w", err)
	}
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("receive sock_diag answer: %w", err)
		}
		done, err := c.parseDatagram(c.buf[:n], fn)
		if err != nil || done {
			return err
		}
	}
}

// parseDatagram walks the netlink messages of one datagram. It reports done
// at NLMSG_DONE and turns NLMSG_ERROR into an error.
func (c *diagConn) parseDatagram(b []byte, fn func(*Sock)) (done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHdrLen {
		mlen := int(ne.Uint32(b[0:]))
		mtype := ne.Uint16(b[4:])
		flags := ne.Uint16(b[6:])
		seq := ne.Uint32(b[8:])
		if mlen < nlmsgHdrLen || mlen > len(b) {
			return true, fmt.Errorf("sock_diag: netlink message length %d of %d bytes", mlen, len(b))
		}
		payload := b[nlmsgHdrLen:mlen]
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			c.DumpIntr++
		}
		if seq != c.seq {
			// A late answer to an earlier, abandoned request: skip.
		} else {
			switch mtype {
			case unix.NLMSG_DONE:
				// The payload is the dump's final status (0 or -errno).
				if len(payload) >= 4 {
					if errno := int32(ne.Uint32(payload)); errno < 0 {
						return true, fmt.Errorf("sock_diag: dump ended with: %w", unix.Errno(-errno))
					}
				}
				return true, nil
			case unix.NLMSG_ERROR:
				if len(payload) >= 4 {
					if errno := int32(ne.Uint32(payload)); errno != 0 {
						return true, fmt.Errorf("sock_diag: kernel error: %w", unix.Errno(-errno))
					}
				}
				return true, nil
			case sockDiagByFamily, tcpDiagGetSock:
				if err := parseDiagMsgInto(payload, &c.sk); err != nil {
					c.BadMsgs++
				} else {
					fn(&c.sk)
				}
			}
		}
		next := (mlen + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return false, nil
}

// inet_diag filter bytecode (linux/inet_diag.h: struct inet_diag_bc_op and
// the INET_DIAG_BC_* codes), carried in an INET_DIAG_REQ_BYTECODE attribute.
const (
	inetDiagReqBytecode = 1
	bcJmp               = 1  // INET_DIAG_BC_JMP: always takes "no"
	bcSEq               = 11 // INET_DIAG_BC_S_EQ: local port ==
	bcDEq               = 12 // INET_DIAG_BC_D_EQ: remote port ==
	bcCgroupCond        = 13 // INET_DIAG_BC_CGROUP_COND: cgroup v2 id ==
)

// diagFilter compiles the port and cgroup parts of a filter into inet_diag
// bytecode, so the kernel skips non-matching sockets before it fills their
// tcp_info: the expensive part of a dump. Conditions are ANDed; a socket is
// accepted if the program runs off its end exactly, rejected if a jump
// lands 4 bytes past it (the kernel's convention). The kernel's audit wants
// every jump target on the chain of "yes" jumps from the start, so an OR is
// laid out as ss does it: A (no -> B), JMP (over B), B.
//
// The program is only an optimisation: the sampler applies the same filter
// again in user space, so a kernel that refuses the bytecode (it is then
// dropped) or ignores part of it gives the same answer, more slowly.
func diagFilter(localPort, remotePort, eitherPort uint16, cgroupID uint64) []byte {
	type op struct {
		code  byte
		arg   []byte // operand after the op
		alt   byte   // for eitherPort: the second op of an OR pair
		altOK bool
	}
	port := func(p uint16) []byte {
		b := make([]byte, 4)
		binary.NativeEndian.PutUint16(b[2:], p) // struct inet_diag_bc_op { 0, 0, port }
		return b
	}
	var ops []op
	if localPort != 0 {
		ops = append(ops, op{code: bcSEq, arg: port(localPort)})
	}
	if remotePort != 0 {
		ops = append(ops, op{code: bcDEq, arg: port(remotePort)})
	}
	if eitherPort != 0 {
		ops = append(ops, op{code: bcSEq, arg: port(eitherPort), alt: bcDEq, altOK: true})
	}
	if cgroupID != 0 {
		b := make([]byte, 8)
		binary.NativeEndian.PutUint64(b, cgroupID)
		ops = append(ops, op{code: bcCgroupCond, arg: b})
	}
	if len(ops) == 0 {
		return nil
	}
	// Lay out to know the total length first.
	total := 0
	for _, o := range ops {
		total += 4 + len(o.arg)
		if o.altOK {
			total += 4 + 4 + len(o.arg)
		}
	}
	prog := make([]byte, 0, total)
	emit := func(code byte, yes, no int, arg []byte) {
		prog = append(prog, code, byte(yes), 0, 0)
		binary.NativeEndian.PutUint16(prog[len(prog)-2:], uint16(no))
		prog = append(prog, arg...)
	}
	for _, o := range ops {
		n := 4 + len(o.arg)
		off := len(prog)
		reject := total + 4 - off
		if o.altOK {
			// S_EQ: yes -> JMP, no -> D_EQ. JMP: -> past D_EQ (next
			// condition). D_EQ: yes -> next condition, no -> reject.
			emit(o.code, n, n+4, o.arg)
			emit(bcJmp, 4, 4+n, nil)
			emit(o.alt, n, total+4-(off+n+4), o.arg)
			continue
		}
		emit(o.code, n, reject, o.arg)
	}
	return prog
}
