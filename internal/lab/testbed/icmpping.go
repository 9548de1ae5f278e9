// icmpping.go: the helper icmp-ping --to IP --count N, a ping whose round
// trip holds no program's wake-up: the far host's kernel answers (ICMP
// echo), and the reply's arrival is the kernel's receive timestamp
// (SO_TIMESTAMPNS), not the time this process got to read it. On a loaded
// machine a UDP ping through two user-space ends read 1-2 ms over the
// path in each of 10 samples; what is left here is the path itself (the
// lab's emulator, whose accuracy it measures). Root (a raw socket).
// Prints the round-trip times in ms as one JSON array, as ping does.
package testbed

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

func init() { RegisterHelper("icmp-ping", helperICMPPing) }

func helperICMPPing(args []string) error {
	fs := flag.NewFlagSet("icmp-ping", flag.ContinueOnError)
	to := fs.String("to", "", "IPv4 address")
	count := fs.Int("count", 10, "probes")
	interval := fs.Duration("interval", 200*time.Millisecond, "between probes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dst := net.ParseIP(*to).To4()
	if dst == nil {
		return fmt.Errorf("--to %q: not an IPv4 address", *to)
	}
	fd, err := icmpSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	id := os.Getpid() & 0xffff
	out := []float64{}
	for seq := 0; seq < *count; seq++ {
		if rtt, ok, err := icmpProbe(fd, dst, id, seq); err != nil {
			return err
		} else if ok {
			out = append(out, float64(rtt.Microseconds())/1000)
		}
		time.Sleep(*interval)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return nil
}

// icmpSocket opens a raw ICMP socket that timestamps what it receives and
// gives up a read after 3 s.
func icmpSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		return -1, fmt.Errorf("raw ICMP socket: %w", err)
	}
	tv := unix.Timeval{Sec: 3}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SO_RCVTIMEO: %w", err)
	}
	return fd, nil
}

// icmpProbe sends one echo request (id, seq) to dst and returns the time
// from just before its send to its reply's kernel timestamp; ok false when
// no reply came within the socket's timeout.
func icmpProbe(fd int, dst net.IP, id, seq int) (rtt time.Duration, ok bool, err error) {
	req, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("lanes")}}).Marshal(nil)
	if err != nil {
		return 0, false, err
	}
	var sa unix.SockaddrInet4
	copy(sa.Addr[:], dst)
	start := time.Now()
	for err = unix.EINTR; err == unix.EINTR; {
		err = unix.Sendto(fd, req, 0, &sa)
	}
	if err != nil {
		return 0, false, fmt.Errorf("send: %w", err)
	}
	buf, oob := make([]byte, 1500), make([]byte, 128)
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err == unix.EINTR { // the Go runtime's preemption signal
			continue
		}
		if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("receive: %w", err)
		}
		at, got := rxTimestamp(oob[:oobn])
		if !got || !isReply(buf[:n], id, seq) {
			continue
		}
		return at.Sub(start), true, nil
	}
}

// isReply is whether pkt (an IPv4 packet, as a raw socket reads it) is the
// echo reply to (id, seq).
func isReply(pkt []byte, id, seq int) bool {
	if len(pkt) < 20 {
		return false
	}
	hl := int(pkt[0]&0x0f) * 4
	if len(pkt) < hl {
		return false
	}
	m, err := icmp.ParseMessage(1, pkt[hl:])
	if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
		return false
	}
	e, isEcho := m.Body.(*icmp.Echo)
	return isEcho && e.ID == id && e.Seq == seq
}

// rxTimestamp reads SO_TIMESTAMPNS's control message from oob.
func rxTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		// struct timespec of a 64-bit kernel: seconds, nanoseconds
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
			sec, nsec := binary.NativeEndian.Uint64(m.Data), binary.NativeEndian.Uint64(m.Data[8:])
			return time.Unix(int64(sec), int64(nsec)), true
		}
	}
	return time.Time{}, false
}
