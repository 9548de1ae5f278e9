// udpcall.go: a UDP flow both ways between a test's two namespaces, as a
// call or a QUIC transfer makes one, for the views' rates.
package testutil

import (
	"net"
	"testing"
	"time"
)

// UDPCall runs, until the test ends, a connected UDP socket in p.A sending
// 1,200-byte datagrams every 5 ms to port of p.B, where each is answered
// with two: a flow with an upload and a download twice its size. It
// returns the socket's local port.
func UDPCall(t testing.TB, p *Pair, port int) int {
	var srv, cli *net.UDPConn
	p.B.Do(t, func() (err error) { srv, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port}); return })
	p.A.Do(t, func() (err error) {
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.AddrB, Port: port})
		return
	})
	done := make(chan struct{})
	t.Cleanup(func() { close(done); srv.Close(); cli.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP(buf[:n], from)
			_, _ = srv.WriteToUDP(buf[:n], from)
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := cli.Read(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		payload := make([]byte, 1200)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_, _ = cli.Write(payload)
			}
		}
	}()
	return cli.LocalAddr().(*net.UDPAddr).Port
}
