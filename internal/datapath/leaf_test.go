// leaf_test.go measures the interactive lane's leaf qdisc where the kernel
// has fq_codel: a request/response flow beside a bulk TCP upload, then
// beside an unresponsive UDP flow at twice the link's rate, all in the same
// (interactive) lane, the tree shaped at 10 Mbit/s; once with fq_codel and
// once with a bfifo leaf, paired in one run on the same veth (the traffic
// test's bed: the far end a 10 Mbit/s link with a 200 ms FIFO, which the
// shaped tree keeps empty).
package datapath

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestInteractiveLeafIsolatesFlows(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: real traffic at 10 Mbit/s")
	}
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	emulateLink(t, p.B, p.LinkB)
	bulkSink, bulkAddr := startSink(t, p.B, p.AddrB, 9001)
	echoAddr := tcpEcho(t, p.B, p.AddrB, 9002)
	udpAddr := udpDiscard(t, p.B, p.AddrB, 9004)
	type run struct {
		leaf        string
		rtt, rttUDP []time.Duration
		bulk        float64
	}
	var runs []run
	for _, want := range []string{LeafAuto, LeafBfifo} {
		d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "lf1", Mode: Shaped, UplinkBps: linkBps, InteractiveLeaf: want})
		r := run{leaf: d.Egress().InteractiveLeaf()}
		if want == LeafAuto && r.leaf != LeafFqCodel {
			t.Skipf("the kernel has no fq_codel: the interactive leaf is %s", r.leaf)
		}
		if want == LeafBfifo && r.leaf != LeafBfifo {
			t.Fatalf("asked for a bfifo leaf, got %s", r.leaf)
		}
		if q, _ := p.A.Command("tc", "qdisc", "show", "dev", p.LinkA).CombinedOutput(); !containsLeaf(string(q), r.leaf) {
			t.Fatalf("interactive leaf %s not in the tree:\n%s", r.leaf, q)
		}
		bulk := startBulk(t, p.A, bulkAddr, "", 30) // no lane cgroup: the interactive lane
		time.Sleep(2 * time.Second)
		r.rtt = rrLatency(t, p.A, echoAddr, 40, 40*time.Millisecond)
		r.bulk = bulkSink.rate(2 * time.Second)
		bulk.Process.Kill()
		bulk.Wait()
		stop := udpFlood(t, p.A, udpAddr, 2*linkBps)
		time.Sleep(time.Second)
		r.rttUDP = rrLatency(t, p.A, echoAddr, 40, 40*time.Millisecond)
		stop()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		runs = append(runs, r)
	}
	fq, fifo := runs[0], runs[1]
	for _, r := range runs {
		t.Logf("interactive leaf %-8s: 1 KB request/response in the lane beside a bulk TCP upload p50 %v p95 %v (bulk %.2f Mbit/s); beside a UDP flow at twice the link's rate p50 %v p95 %v",
			r.leaf, pct(r.rtt, .5).Round(time.Microsecond), pct(r.rtt, .95).Round(time.Microsecond), r.bulk/1e6,
			pct(r.rttUDP, .5).Round(time.Microsecond), pct(r.rttUDP, .95).Round(time.Microsecond))
	}
	ratio := func(a, b []time.Duration, q float64) float64 { return float64(pct(a, q)) / float64(pct(b, q)) }
	t.Logf("fq_codel / bfifo: beside TCP p50 %.3f, p95 %.3f, bulk rate %.2f; beside UDP p50 %.3f, p95 %.3f",
		ratio(fq.rtt, fifo.rtt, .5), ratio(fq.rtt, fifo.rtt, .95), fq.bulk/fifo.bulk, ratio(fq.rttUDP, fifo.rttUDP, .5), ratio(fq.rttUDP, fifo.rttUDP, .95))
	if pct(fq.rttUDP, .5)*5 > pct(fifo.rttUDP, .5) {
		testutil.TimingErrorf(t, "beside the UDP flow, fq_codel's request/response p50 %v is not below a fifth of the bfifo's %v", pct(fq.rttUDP, .5), pct(fifo.rttUDP, .5))
	}
	if pct(fq.rtt, .5) > pct(fifo.rtt, .5) {
		testutil.TimingErrorf(t, "beside the TCP upload, fq_codel's request/response p50 %v is above the bfifo's %v", pct(fq.rtt, .5), pct(fifo.rtt, .5))
	}
	if fq.bulk < 0.8*fifo.bulk {
		testutil.TimingErrorf(t, "the bulk upload got %.2f Mbit/s under fq_codel against %.2f under the bfifo", fq.bulk/1e6, fifo.bulk/1e6)
	}
}

// udpDiscard reads and drops datagrams on ip:port in ns.
func udpDiscard(t *testing.T, ns *testutil.NetNS, ip net.IP, port int) *net.UDPAddr {
	t.Helper()
	addr := &net.UDPAddr{IP: ip, Port: port}
	var c *net.UDPConn
	ns.Do(t, func() (err error) { c, err = net.ListenUDP("udp4", addr); return err })
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	return addr
}

// udpFlood sends 1,400-byte datagrams from ns to addr at bps, unresponsive
// to loss, until the returned stop is called.
func udpFlood(t *testing.T, ns *testutil.NetNS, addr *net.UDPAddr, bps int) (stop func()) {
	t.Helper()
	var c *net.UDPConn
	ns.Do(t, func() (err error) { c, err = net.DialUDP("udp4", nil, addr); return err })
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		buf := make([]byte, 1400)
		gap := time.Duration(float64(time.Second) * float64(len(buf)*8) / float64(bps))
		next := time.Now()
		for {
			select {
			case <-done:
				return
			default:
			}
			c.Write(buf) // drops at a full queue are the point
			next = next.Add(gap)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			<-finished
			c.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// containsLeaf says whether tc's qdisc listing has the interactive lane's
// leaf of kind (fq_codel 112: or bfifo 12:).
func containsLeaf(tc, kind string) bool {
	handle := "12:"
	if kind == LeafFqCodel {
		handle = "112:"
	}
	return strings.Contains(tc, "qdisc "+kind+" "+handle+" parent 1:12 ")
}
