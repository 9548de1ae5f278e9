// quic.go: QUIC traffic helpers (quic-go, with its own congestion
// control: CUBIC), for background QUIC at a remote bottleneck:
//
//   - quic-serve --listen ADDR   a QUIC server (self-signed certificate,
//     ALPN "lanes-lab"): on each stream, the client's first byte says
//     'u' (the server reads and discards) or 'd' (it sends without end);
//     prints "ready".
//   - quic-bulk --to ADDR --dir up|down   one endless bulk stream; prints
//     {"src":..,"dst":..} once connected, then {"bytes":N} (sent or
//     received so far) every 200 ms until killed.
//
// With QLOGDIR set, each connection writes its qlog there (quic-go's
// qlog.DefaultConnectionTracer): its congestion window, RTT and losses.
package testbed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

const quicALPN = "lanes-lab"

// quicServerTLS is a throw-away self-signed certificate.
func quicServerTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{quicALPN}}, nil
}

func helperQUICServe(args []string) error {
	fs := flag.NewFlagSet("quic-serve", flag.ContinueOnError)
	listen := fs.String("listen", ":4433", "UDP address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tc, err := quicServerTLS()
	if err != nil {
		return err
	}
	ln, err := quic.ListenAddr(*listen, tc, &quic.Config{MaxIdleTimeout: 30 * time.Second, Tracer: qlog.DefaultConnectionTracer})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	ctx := context.Background()
	for {
		c, err := ln.Accept(ctx)
		if err != nil {
			return err
		}
		go func() {
			for {
				s, err := c.AcceptStream(ctx)
				if err != nil {
					return
				}
				go quicServeStream(s)
			}
		}()
	}
}

// quicServeStream reads the stream's direction byte and runs it.
func quicServeStream(s *quic.Stream) {
	defer s.Close()
	var dir [1]byte
	if _, err := io.ReadFull(s, dir[:]); err != nil {
		return
	}
	if dir[0] == 'u' {
		_, _ = io.Copy(io.Discard, s)
		return
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := s.Write(buf); err != nil {
			return
		}
	}
}

func helperQUICBulk(args []string) error {
	fs := flag.NewFlagSet("quic-bulk", flag.ContinueOnError)
	to := fs.String("to", "", "server UDP address")
	dir := fs.String("dir", "up", "up or down")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir != "up" && *dir != "down" {
		return fmt.Errorf("--dir %q: want up or down", *dir)
	}
	ctx := context.Background()
	c, err := quic.DialAddr(ctx, *to, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quicALPN}},
		&quic.Config{MaxIdleTimeout: 30 * time.Second, Tracer: qlog.DefaultConnectionTracer})
	if err != nil {
		return err
	}
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	if _, err := s.Write([]byte((*dir)[:1])); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]string{"src": c.LocalAddr().String(), "dst": c.RemoteAddr().String()})
	fmt.Println(string(b))
	var n atomic.Int64
	errc := make(chan error, 1)
	go func() { errc <- quicPump(s, *dir == "up", &n) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			return err
		case <-tick.C:
			fmt.Printf("{\"bytes\":%d}\n", n.Load())
		}
	}
}

// quicWriteBytes is the size of an upload's writes (quicPump).
const quicWriteBytes = 4 << 10

// quicPump sends or receives on s without end, counting the bytes. It
// sends in writes of quicWriteBytes: a write returns once the stream has
// taken all of it, so the count moves by a write at a time, and a 64 KB
// write, a second of a 0.5 Mbit/s link, read as 0.35 of the link in a
// 3 s window where the class sent nothing.
func quicPump(s *quic.Stream, up bool, n *atomic.Int64) error {
	buf := make([]byte, 64<<10)
	for {
		var k int
		var err error
		if up {
			k, err = s.Write(buf[:quicWriteBytes])
		} else {
			k, err = s.Read(buf)
		}
		n.Add(int64(k))
		if err != nil {
			return err
		}
	}
}
