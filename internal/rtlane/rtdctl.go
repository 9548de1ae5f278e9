// rtdctl.go: the control protocol between the lane and lanes-rtd
// (rtd/ctl.h; docs/realtime.md "The control socket"): a SOCK_SEQPACKET
// socketpair of fixed structs in native byte order. The Go structs below
// mirror ctl.h (TestControlLayout checks the layout with the C compiler);
// the lane sends the configuration, connections and routes, and serves
// what lanes-rtd asks: destinations to resolve, clients' STATS requests,
// closed connections, routes it forgot.
package rtlane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// Control message types and flags (rtd/ctl.h).
const (
	rtdConfig      = 1
	rtdConn        = 2
	rtdRoute       = 3
	rtdCountersAsk = 4
	rtdReply       = 5
	rtdTraceSync   = 6
	rtdReady       = 0x81
	rtdLookup      = 0x82
	rtdForward     = 0x83
	rtdClosed      = 0x84
	rtdCounters    = 0x85
	rtdForget      = 0x86

	rtdEnabled  = 0x1
	rtdAttachOK = 0x2

	rtdReasons = 32
)

type rtdHdr struct{ Type, Conn uint32 }

type rtdConfigMsg struct {
	H                                rtdHdr
	RateBps, NetnsCookie             uint64
	Overhead, Backlog, Reserve, MaxQ uint32
	Flags, ClassPrio, PlainPrio      uint32
	QueueBytes, Requests, Pad        uint32
}

type rtdConnMsg struct {
	H        rtdHdr
	UID, Pad uint32
}

type rtdRouteMsg struct {
	H      rtdHdr
	Family uint8
	Class  uint8
	Pad    [6]uint8
	Addr   [16]byte
}

type rtdForwardMsg struct {
	H        rtdHdr
	UID, Len uint32
}

type rtdFlow struct {
	UID, Flow                                                    uint32
	Admitted, Rejected, Sent, SentBytes, DroppedLate, SendErrors uint64
	MinMarginNs                                                  int64
	Rejects                                                      [rtdReasons]uint64
}

type rtdCountersMsg struct {
	H                   rtdHdr
	NFlows, More        uint32
	Depth, Conns        uint32
	QueuedNs            int64
	RateBps             uint64
	AppSocks            int64
	LostNotices, LostEv uint64
	Allocs              uint64
	PoolBytes, PoolFree uint64
	SendFull            uint64
	Totals              rtdFlow
}

type rtdEvent struct {
	Kind, Reason   uint8
	Pad            uint16
	UID, Flow, Seq uint32
	Time, Deadline int64
	Tx             int64
}

func (p *rtdProc) send(msg any, fd int) error {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.NativeEndian, msg)
	return p.sendRaw(b.Bytes(), fd)
}

func (p *rtdProc) sendRaw(b []byte, fd int) error {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for {
		err := unix.Sendmsg(p.ctl, b, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// rtdConfig is the lane's configuration as lanes-rtd takes it.
func (l *Lane) rtdConfig() *rtdConfigMsg {
	m := rtdConfigMsg{H: rtdHdr{Type: rtdConfig}, RateBps: l.rate.Load(), NetnsCookie: l.netns,
		Overhead: uint32(l.cfg.Overhead), Backlog: uint32(l.cfg.Backlog), Reserve: uint32(l.cfg.Reserve),
		MaxQ: uint32(l.cfg.MaxQueue), ClassPrio: lane.Realtime.ClassID(), PlainPrio: 6,
		QueueBytes: uint32(l.cfg.MaxQueueBytes), Requests: uint32(l.cfg.ClientRequests)}
	if l.cfg.Enabled {
		m.Flags |= rtdEnabled
	}
	if l.attachOK {
		m.Flags |= rtdAttachOK
	}
	return &m
}

func (p *rtdProc) sendRoute(a netip.Addr, class bool) error {
	m := rtdRouteMsg{H: rtdHdr{Type: rtdRoute}}
	switch {
	case a.Is4():
		m.Family = 4
		a4 := a.As4()
		copy(m.Addr[:], a4[:])
	case a.Is6():
		m.Family = 6
		m.Addr = a.As16()
	}
	if class {
		m.Class = 1
	}
	return p.send(&m, -1)
}

// routeAsker is the destinations' classes lanes-rtd asks for and forgets
// (routeTable).
type routeAsker interface {
	askRoute(a netip.Addr)
	forgetRoute(a netip.Addr)
}

// helperClients is what lanes-rtd's messages about clients reach in the
// lane (the Lane): a handed connection's end, a forwarded STATS.
type helperClients interface {
	helperClosed(id uint32)
	statsBody(uid uint32) []byte
}

// serveHelper reads lanes-rtd's messages until the control socket ends;
// it returns why.
func (p *rtdProc) serveHelper(routes routeAsker, clients helperClients) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(p.ctl, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("realtime: lanes-rtd control: %w", err)
		case n == 0:
			return errors.New("realtime: lanes-rtd closed its control socket")
		case n < 8:
			return fmt.Errorf("realtime: lanes-rtd sent %d bytes", n)
		}
		msg := append([]byte(nil), buf[:n]...)
		p.helperMessage(msg, routes, clients)
	}
}

// helperMessage acts on one message of lanes-rtd.
func (p *rtdProc) helperMessage(msg []byte, routes routeAsker, clients helperClients) {
	var h rtdHdr
	_, _ = binary.Decode(msg, binary.NativeEndian, &h)
	switch h.Type {
	case rtdLookup:
		var r rtdRouteMsg
		if _, err := binary.Decode(msg, binary.NativeEndian, &r); err == nil {
			routes.askRoute(routeAddr(r))
		}
	case rtdForward:
		go p.answerForward(h.Conn, msg, clients)
	case rtdClosed:
		clients.helperClosed(h.Conn)
	case rtdForget:
		var r rtdRouteMsg
		if _, err := binary.Decode(msg, binary.NativeEndian, &r); err == nil {
			routes.forgetRoute(routeAddr(r))
		}
	case rtdCounters:
		select {
		case p.answers <- msg:
		default:
		}
	}
}

func routeAddr(r rtdRouteMsg) netip.Addr {
	if r.Family == 4 {
		return netip.AddrFrom4([4]byte(r.Addr[:4]))
	}
	return netip.AddrFrom16(r.Addr)
}

// answerForward answers a client's STATS request lanes-rtd handed over.
func (p *rtdProc) answerForward(id uint32, msg []byte, clients helperClients) {
	var f rtdForwardMsg
	_, _ = binary.Decode(msg, binary.NativeEndian, &f)
	req, _ := wire.ParseRequest(msg[binary.Size(f):])
	rep := wire.Reply{Type: wire.TypeStatsOK, Flow: req.Flow, Seq: req.Seq, Body: clients.statsBody(f.UID),
		Time: uint64(monoclock.Now())}
	out := binary.NativeEndian.AppendUint32(nil, rtdReply)
	out = binary.NativeEndian.AppendUint32(out, id)
	out = wire.AppendReply(out, &rep)
	_ = p.sendRaw(out, -1)
}
