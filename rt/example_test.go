package rt_test

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/lanes-net/lanes/rt"
)

// An echo client on the realtime lane: its own UDP socket, attached once,
// then each request handed to the daemon with a 5 ms deadline; the
// admitted ones leave from that socket, so the echoes come back to it.
func Example() {
	udp, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.77.0.2:9000")))
	if err != nil {
		log.Fatal(err)
	}
	defer udp.Close()
	c, err := rt.Dial(rt.SocketPath()) // LANES_RT_SOCKET or /run/lanes/rt.sock
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Attach(udp); err != nil {
		var refused *rt.RefusedError
		if errors.As(err, &refused) {
			log.Fatalf("attach refused: %s", refused.Reason) // e.g. not-granted
		}
		log.Fatal(err)
	}
	refusals := map[rt.Reason]int{}
	reply := make([]byte, 1500)
	for i := 0; i < 100; i++ {
		res, err := c.SendWithin(1, netip.AddrPort{}, 5*time.Millisecond, []byte(fmt.Sprint("request ", i)))
		if err != nil {
			log.Fatal(err)
		}
		if !res.Admitted {
			refusals[res.Reason]++
			continue
		}
		_ = udp.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := udp.Read(reply); err == nil {
			fmt.Printf("echo %q\n", reply[:n])
		}
	}
	for _, n := range c.Notices(true) {
		fmt.Printf("datagram %d admitted but dropped: %s\n", n.Seq, n.Reason)
	}
	fmt.Println("refused:", refusals)
}
