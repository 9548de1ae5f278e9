// rt-echo-go: examples/rt-echo in Go (package rt only), an application
// that keeps its own UDP socket and sends through the lanes realtime lane.
//
//	rt-echo-go ADDR PORT COUNT DEADLINE_US
//
// Connects a UDP socket (IPv4 or IPv6) to an echo server at ADDR PORT,
// hands it to the daemon once (Attach), then sends COUNT requests, one
// every millisecond, each with a deadline DEADLINE_US from its send call;
// the daemon admits or refuses each at once and sends the admitted ones
// from this socket, so the echoes come back to it. Prints
//
//	sent N admitted A refused R replies Y
//
// then `refused REASON COUNT` per reason of the refusals, and on stderr
// its socket's local port. The daemon's socket: LANES_RT_SOCKET, or
// /run/lanes/rt.sock.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/lanes-net/lanes/rt"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rt-echo:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: rt-echo-go ADDR PORT COUNT DEADLINE_US")
		os.Exit(2)
	}
	server, err := netip.ParseAddrPort(net.JoinHostPort(args[0], args[1]))
	count, err2 := strconv.Atoi(args[2])
	deadlineUS, err3 := strconv.Atoi(args[3])
	if err := errors.Join(err, err2, err3); err != nil {
		return err
	}
	udp, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return err
	}
	defer udp.Close()
	fmt.Fprintln(os.Stderr, "rt-echo: local port", udp.LocalAddr().(*net.UDPAddr).Port)
	c, err := rt.Dial(rt.SocketPath())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Attach(udp); err != nil {
		return err // "realtime lane: attach refused: not granted: add the uid ..."
	}
	replies := make(chan uint32, count)
	go readEchoes(udp, replies)
	admitted, refused := map[uint32]bool{}, map[string]int{}
	payload := make([]byte, 64)
	next := time.Now()
	for i := 0; i < count; i++ {
		binary.BigEndian.PutUint32(payload, uint32(i))
		res, err := c.SendWithin(1, netip.AddrPort{}, time.Duration(deadlineUS)*time.Microsecond, payload)
		if err != nil {
			return err
		}
		if res.Admitted {
			admitted[uint32(i)] = true
		} else {
			refused[res.Reason.String()]++
		}
		next = next.Add(time.Millisecond)
		time.Sleep(time.Until(next))
	}
	got := 0
	timeout := time.After(time.Second) // for the echoes still on their way
wait:
	for got < len(admitted) {
		select {
		case seq := <-replies:
			if admitted[seq] {
				admitted[seq] = false // counted once
				got++
			}
		case <-timeout:
			break wait
		}
	}
	fmt.Printf("sent %d admitted %d refused %d replies %d\n", count, len(admitted), count-len(admitted), got)
	reasons := make([]string, 0, len(refused))
	for r := range refused {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Printf("refused %s %d\n", r, refused[r])
	}
	return nil
}

// readEchoes passes the sequence number of each echo until udp is closed.
func readEchoes(udp *net.UDPConn, replies chan<- uint32) {
	buf := make([]byte, 64)
	for {
		n, err := udp.Read(buf)
		if err != nil {
			return
		}
		if n >= 4 {
			select {
			case replies <- binary.BigEndian.Uint32(buf):
			default:
			}
		}
	}
}
