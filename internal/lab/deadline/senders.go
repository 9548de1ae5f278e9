// senders.go: the realtime senders, one per flow, each a SCHED_FIFO thread
// sending on its period: through the realtime lane (laneSender) or a plain
// UDP socket into the default qdisc (udpSender, its enqueue and dequeue
// times from SO_TIMESTAMPING), and the lane's trace (traceIndex) that
// stamps the lanes path's enqueue and dequeue times.
package deadline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/edfqdisc"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/rtlane"
)

// setFIFO locks the calling goroutine to its thread and makes the thread
// SCHED_FIFO prio (the paper's real-time senders and receiver); the thread
// is discarded when the goroutine ends without unlocking.
func setFIFO(prio int) {
	runtime.LockOSThread()
	if prio > 0 {
		a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
		_ = unix.SchedSetAttr(0, &a, 0)
	}
}

// sleepUntilMono sleeps on CLOCK_MONOTONIC until t (ns).
func sleepUntilMono(t int64) {
	ts := unix.NsecToTimespec(t)
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}

func dlPayload(buf []byte, flow, seq uint32) []byte {
	binary.BigEndian.PutUint32(buf, flow)
	binary.BigEndian.PutUint32(buf[4:], seq)
	return buf
}

// sender is how one configuration hands a datagram to the network; it
// returns the record with what it knows (t1, and for lanes the decision).
type dlSender interface {
	send(f dlFlow, seq uint32, buf []byte) dlRecord
	close()
}

// laneSender: through the realtime lane.
type laneSender struct {
	c   *rtclient.Client
	dst netip.AddrPort
	own *net.UDPConn // the client's own socket (--own-socket), attached
}

func (s *laneSender) send(f dlFlow, seq uint32, buf []byte) dlRecord {
	t1 := monoclock.Now()
	d := t1 + int64(f.Deadline)
	rec := dlRecord{Flow: f.ID, Seq: seq, Deadline: d, Send: t1}
	res, err := s.c.Send(f.ID, s.dst, d, dlPayload(buf, f.ID, seq))
	switch {
	case err != nil:
		rec.Refused = err.Error()
	case !res.Admitted:
		rec.Refused = res.Reason.String()
	}
	return rec
}

func (s *laneSender) close() {
	s.c.Close()
	if s.own != nil {
		s.own.Close()
	}
}

// attachOwn gives the sender a UDP socket of its own, connected to its
// destination (opened by open, in the sender's namespace), and attaches it.
func (s *laneSender) attachOwn(open func(func() error) error) error {
	if err := open(func() (err error) { s.own, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.dst)); return err }); err != nil {
		return err
	}
	_, err := s.c.Attach(s.own)
	return err
}

// udpSender: a plain UDP socket in snd (default Linux), optionally with a
// priority (the FIFO top class of the inversion scenario), with
// SO_TIMESTAMPING TX_SCHED + TX_SOFTWARE for points 2 and 3.
type udpSender struct {
	fd     int
	dst    unix.Sockaddr
	mu     sync.Mutex
	next   uint32
	keys   map[uint32][2]uint32 // tskey -> (flow, seq)
	offset int64
	txtime bool // connected, SO_TXTIME: the deadline rides in SCM_TXTIME (qdisc.go)
}

func (b *dlBed) newUDPSender(prio int) (*udpSender, error) {
	s := &udpSender{keys: map[uint32][2]uint32{}, dst: &unix.SockaddrInet4{Addr: b.dst.As4()}, offset: rtlane.RealtimeOffset()}
	err := b.snd.Do(func() (err error) {
		if s.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		flags := unix.SOF_TIMESTAMPING_TX_SCHED | unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE |
			unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
			return fmt.Errorf("SO_TIMESTAMPING: %w", err)
		}
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		if prio != 0 {
			if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_PRIORITY, prio); err != nil {
				return fmt.Errorf("SO_PRIORITY: %w", err)
			}
		}
		return nil
	})
	return s, err
}

func (s *udpSender) setPort(port int) { s.dst.(*unix.SockaddrInet4).Port = port }

func (s *udpSender) send(f dlFlow, seq uint32, buf []byte) dlRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	t1 := monoclock.Now()
	rec := dlRecord{Flow: f.ID, Seq: seq, Deadline: t1 + int64(f.Deadline), Send: t1}
	var err error
	if s.txtime {
		err = sendTxtime(s.fd, dlPayload(buf, f.ID, seq), rec.Deadline)
	} else {
		err = unix.Sendto(s.fd, dlPayload(buf, f.ID, seq), 0, s.dst)
	}
	if s.txtime && errors.Is(err, unix.ENOBUFS) {
		// The qdisc's refusal at enqueue: the datagram was built, so it
		// took a timestamp key.
		s.next++
		rec.Refused = "refused at enqueue (ENOBUFS)"
		return rec
	}
	if err != nil {
		rec.Refused = "send: " + err.Error()
		return rec
	}
	s.keys[s.next] = [2]uint32{f.ID, seq}
	s.next++
	return rec
}

// drain reads the error queue: (flow, seq) -> {sched, driver} CLOCK_MONOTONIC.
func (s *udpSender) drain() map[[2]uint32][2]int64 {
	out := map[[2]uint32][2]int64{}
	buf := make([]byte, 64)
	oob := make([]byte, 512)
	for {
		_, oobn, _, _, err := unix.Recvmsg(s.fd, buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err != nil {
			break
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		var ts int64
		var info, key uint32
		ok := false
		for _, m := range msgs {
			switch {
			case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPING && len(m.Data) >= 16:
				t := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				ts = t.Nano() - s.offset
			case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR && len(m.Data) >= 16:
				info = binary.NativeEndian.Uint32(m.Data[8:])
				key = binary.NativeEndian.Uint32(m.Data[12:])
				ok = true
			}
		}
		if !ok || ts == 0 {
			continue
		}
		fs, found := s.keys[key]
		if !found {
			continue
		}
		v := out[fs]
		switch info {
		case unix.SCM_TSTAMP_SCHED:
			v[0] = ts
		case unix.SCM_TSTAMP_SND:
			v[1] = ts
		}
		out[fs] = v
	}
	return out
}

func (s *udpSender) close() { unix.Close(s.fd) }

// runFlows runs the periodic senders for dur, each on its own thread at
// SCHED_FIFO prio, and returns their records.
func runFlows(ctx context.Context, flows []dlFlow, dur time.Duration, prio int, mk func() (dlSender, error)) ([]dlRecord, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var recs []dlRecord
	start := monoclock.Now()
	end := start + int64(dur)
	for _, f := range flows {
		s, err := mk()
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func(f dlFlow, s dlSender) {
			defer wg.Done()
			defer s.close()
			setFIFO(prio)
			buf := make([]byte, f.Size)
			var seq uint32
			var mine []dlRecord
			next := start + int64(f.Offset)
			sleepUntilMono(next)
			for next < end && ctx.Err() == nil {
				for i := 0; i < f.Burst; i++ {
					seq++
					mine = append(mine, s.send(f, seq, buf))
				}
				next += int64(f.Period)
				sleepUntilMono(next)
			}
			mu.Lock()
			recs = append(recs, mine...)
			mu.Unlock()
		}(f, s)
	}
	wg.Wait()
	return recs, ctx.Err()
}

// traceIndex collects the lane's enqueue/dequeue/drop times by (flow, seq).
type traceIndex struct {
	mu sync.Mutex             // called on the lane's realtime threads
	m  map[[2]uint32][3]int64 // admit, release, drop
}

func newTraceIndex() *traceIndex { return &traceIndex{m: make(map[[2]uint32][3]int64, 1<<15)} }

func (ti *traceIndex) add(e rtlane.Event) {
	ti.mu.Lock()
	k := [2]uint32{e.Flow, e.Seq}
	v := ti.m[k]
	switch e.Kind {
	case rtlane.EvAdmit:
		v[0] = e.Time
	case rtlane.EvRelease:
		v[1] = e.Time
	case rtlane.EvDrop:
		v[2] = e.Time
	}
	ti.m[k] = v
	ti.mu.Unlock()
}

// dlSenders is how one configuration's flows send: through the lane's
// client socket (the lanes configurations) or plain UDP sockets, whose TX
// timestamps are drained after the run.
type dlSenders struct {
	mk      func() (dlSender, error)
	lane    *rtlane.Lane // the lanes configurations
	sock    string       // the lane's client socket
	udps    []*udpSender
	cleanup []func()
	// The kernel path (qdisc.go): the qdisc, and qdFlow puts a socket's
	// flow in its realtime lane.
	qd     *edfqdisc.Qdisc
	qdFlow func(src, dst netip.AddrPort) error
}

// close undoes what openSenders set up, last first.
func (s *dlSenders) close() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
}

// openSenders sets up the configuration name's path to dst: the lanes
// tree and its deadline lane, the lanes tree alone (fifo-top: UDP in the
// realtime class), or the machine's default root (default: a FIFO).
func (b *dlBed) openSenders(ctx context.Context, p dlParams, name string, dst netip.AddrPort, ti *traceIndex) (*dlSenders, error) {
	s := &dlSenders{}
	switch name {
	case "lanes", "lanes-proc":
		if err := b.openLaneSenders(ctx, s, p, name, ti); err != nil {
			return s, err
		}
		s.mk = func() (dlSender, error) {
			c, err := rtclient.Dial(s.sock)
			if err != nil {
				return nil, err
			}
			ls := &laneSender{c: c, dst: dst}
			if p.ownSocket {
				if err := ls.attachOwn(b.snd.Do); err != nil {
					ls.close()
					return nil, fmt.Errorf("own socket: %w", err)
				}
			}
			return ls, nil
		}
		return s, nil
	case "fifo-top":
		// The lanes tree without the lane's EDF: the lane is started only
		// because openLanes brings both; nothing is sent through it.
		if err := b.openLaneSenders(ctx, s, p, "", ti); err != nil {
			return s, err
		}
	case "qdisc":
		if err := b.openQdisc(s); err != nil {
			return s, fmt.Errorf("kernel path: %w", err)
		}
		s.mk = func() (dlSender, error) {
			u, err := b.newTxtimeSender(dst, s.qdFlow)
			if err != nil {
				return nil, err
			}
			s.udps = append(s.udps, u)
			return &keepOpen{u}, nil
		}
		return s, nil
	case "default":
		if err := b.installFIFO(max(1000/p.scale, 10)); err != nil {
			return s, err
		}
		s.cleanup = append(s.cleanup, func() { b.removeRoot() })
	}
	prio := 0
	if name == "fifo-top" {
		prio = int(lane.Realtime.ClassID())
	}
	s.mk = func() (dlSender, error) {
		u, err := b.newUDPSender(prio)
		if err != nil {
			return nil, err
		}
		u.setPort(int(dst.Port()))
		s.udps = append(s.udps, u)
		return &keepOpen{u}, nil
	}
	return s, nil
}

// openLaneSenders starts the lanes tree and its deadline lane on a client
// socket in a fresh directory, tuned for the lanes variant name ("": the
// lane's defaults).
func (b *dlBed) openLaneSenders(ctx context.Context, s *dlSenders, p dlParams, name string, ti *traceIndex) error {
	dir, err := os.MkdirTemp("", "lanes-lab-dl")
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	s.sock = filepath.Join(dir, "rt.sock")
	var tune func(c *config.Realtime)
	if name != "" {
		tune = func(c *config.Realtime) {
			if p.lanePrio > 0 {
				c.ReleasePriority = p.lanePrio
			}
		}
	}
	closeLane, l, err := b.openLanes(ctx, s.sock, ti.add, tune)
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, closeLane)
	s.lane = l
	return nil
}

// stamp fills each record's enqueue and dequeue times (the lane's trace
// for the lanes configurations, the UDP sockets' TX timestamps otherwise)
// and its arrival, closes the UDP senders, and returns how many TX
// timestamps there were.
func (s *dlSenders) stamp(name string, recs []dlRecord, ti *traceIndex, got map[[2]uint32][2]int64) int {
	kts := map[[2]uint32][2]int64{}
	for _, u := range s.udps {
		for k, v := range u.drain() {
			kts[k] = v
		}
		u.close()
	}
	for i := range recs {
		r := &recs[i]
		k := [2]uint32{r.Flow, r.Seq}
		if strings.HasPrefix(name, "lanes") {
			ti.mu.Lock()
			v := ti.m[k]
			ti.mu.Unlock()
			r.Enqueue, r.Dequeue, r.Dropped = v[0], v[1], v[2] != 0
		} else if v, ok := kts[k]; ok {
			r.Enqueue, r.Dequeue = v[0], v[1]
		}
		if a, ok := got[k]; ok {
			r.Arrive, r.Receive = a[0], a[1]
		}
	}
	return len(kts)
}

// keepOpen closes a udpSender only after its timestamps were drained.
type keepOpen struct{ *udpSender }

func (keepOpen) close() {}
