// lberemote_probe.go: the foreground's probe on the remote bed: a UDP
// echo to the foreground server every 100 ms over a window, its RTTs and
// losses.
package lbe

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// probe sends a UDP echo request to fgsrv every 100 ms over [from, to) and
// returns the RTTs of the answers (lost: counted).
func (rb *remoteBed) probe(ctx context.Context, from, to time.Duration) ([]float64, int, error) {
	if _, err := rb.until(ctx, from); err != nil {
		return nil, 0, err
	}
	var conn net.Conn
	err := rb.phone.Do(func() (err error) {
		conn, err = net.Dial("udp", net.JoinHostPort(rb.fg.Addr.String(), "7"))
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	var mu sync.Mutex
	sent := map[uint64]time.Time{}
	var rtts []float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				seq := binary.BigEndian.Uint64(buf)
				mu.Lock()
				if t, ok := sent[seq]; ok {
					rtts = append(rtts, float64(time.Since(t).Microseconds())/1000)
					delete(sent, seq)
				}
				mu.Unlock()
			}
		}
	}()
	pkt := make([]byte, 64)
	for seq := uint64(0); time.Since(rb.base) < to; seq++ {
		binary.BigEndian.PutUint64(pkt, seq)
		mu.Lock()
		sent[seq] = time.Now()
		mu.Unlock()
		_, _ = conn.Write(pkt)
		if err := testbed.SleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, 0, err
		}
	}
	_ = testbed.SleepCtx(ctx, rb.cfg.answerWait()) // answers still queued
	conn.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return rtts, len(sent), nil
}

// answerWait is how long the probe waits for answers still queued after
// its last request: 2 s, or both links' full buffers and delays on a
// deeper --queue (a slow link's late answers are not losses).
func (c *RemoteConfig) answerWait() time.Duration {
	return max(2*time.Second, 2*(c.QueueTime+c.Delay)+time.Second)
}
