// tunprobe.go: `lanes lab run tun-probe`, the measurement behind the lab's
// back-pressure design: does the TUN driver stop its queue when its reader
// is slow (so the qdisc above it backs up), or drop?
//
// A namespace gets a TUN whose reader never reads, txqueuelen N, and an HTB
// root whose class never limits (like lanes' device-bottleneck tree); a UDP
// socket in the namespace sends a burst; then the qdisc's backlog and drops
// and the device's TX drops are read, and the ring is drained to count what
// it held. A driver that back-pressures leaves burst - N packets in the
// qdisc backlog; one that drops counts them as TX drops.
package accuracy

import (
	"context"
	"flag"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// TUNProbe is the measurement.
type TUNProbe struct {
	Sent          int    `json:"sent"`
	TxQueueLen    int    `json:"txqueuelen"`
	QdiscBacklog  int    `json:"qdisc_backlog_packets"`
	QdiscDropped  int    `json:"qdisc_dropped"`
	DeviceDropped uint64 `json:"device_tx_dropped"`
	RingHeld      int    `json:"ring_held"`
	Qdisc         string `json:"tc_s_qdisc"`
}

var backlogRe = regexp.MustCompile(`backlog \d+b (\d+)p`)
var droppedRe = regexp.MustCompile(`dropped (\d+)`)

// ProbeTUN runs the probe.
func ProbeTUN(ctx context.Context, burst, txqlen int) (*TUNProbe, error) {
	t, err := topo.New()
	if err != nil {
		return nil, err
	}
	defer t.Close()
	n, err := t.AddNode("probe", "")
	if err != nil {
		return nil, err
	}
	tun, err := emu.OpenTUN(n.Handle, testbed.TUNName)
	if err != nil {
		return nil, err
	}
	defer tun.Close()
	if err := n.ConfigureTUN(testbed.TUNName, txqlen); err != nil {
		return nil, err
	}
	if _, err := n.InstallGate(testbed.TUNName, 10e9, 1<<20, "pfifo", 1000); err != nil {
		return nil, err
	}
	p := &TUNProbe{Sent: burst, TxQueueLen: txqlen}
	if err := n.Do(func() error { return sendBurst(burst) }); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond)
	if err := p.readCounters(n); err != nil {
		return nil, err
	}
	p.RingHeld = drainRing(tun, burst)
	return p, nil
}

// sendBurst sends burst datagrams of 1000 bytes towards the TUN's
// (unanswered) network.
func sendBurst(burst int) error {
	c, err := net.Dial("udp", "10.99.99.99:9")
	if err != nil {
		return err
	}
	defer c.Close()
	b := make([]byte, 1000)
	for i := 0; i < burst; i++ {
		if _, err := c.Write(b); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	return nil
}

// readCounters reads the qdisc's backlog and drops and the device's TX
// drops in node n.
func (p *TUNProbe) readCounters(n *topo.Node) error {
	out, err := n.Run("tc", "-s", "qdisc", "show", "dev", testbed.TUNName)
	if err != nil {
		return err
	}
	p.Qdisc = out
	if m := backlogRe.FindStringSubmatch(out); m != nil {
		p.QdiscBacklog, _ = strconv.Atoi(m[1])
	}
	if m := droppedRe.FindStringSubmatch(out); m != nil {
		p.QdiscDropped, _ = strconv.Atoi(m[1])
	}
	_ = n.Do(func() error {
		l, err := netlink.LinkByName(testbed.TUNName)
		if err == nil && l.Attrs().Statistics != nil {
			p.DeviceDropped = l.Attrs().Statistics.TxDropped
		}
		return err
	})
	return nil
}

// drainRing reads the TUN's ring until it has read burst packets, for at
// most 500 ms (then it closes the TUN), and returns how many it held.
func drainRing(tun *emu.TUN, burst int) int {
	got := make(chan int, 1)
	go func() {
		b := make([]byte, 2048)
		k := 0
		for k < burst {
			if _, err := tun.Read(b); err != nil {
				break
			}
			k++
		}
		got <- k
	}()
	select {
	case k := <-got:
		return k
	case <-time.After(500 * time.Millisecond):
		tun.Close()
		return <-got
	}
}

func init() {
	testbed.Register(testbed.Experiment{Name: "tun-probe", Summary: "does TUN back-pressure its qdisc when the reader is slow? (why the lab has a gate)",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			burst := fs.Int("burst", 200, "datagrams sent at once")
			txq := fs.Int("txqueuelen", 4, "TUN txqueuelen (its ring size)")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				r := &testbed.Result{Experiment: "tun-probe", Started: time.Now(), Params: map[string]any{"burst": *burst, "txqueuelen": *txq}}
				p, err := ProbeTUN(ctx, *burst, *txq)
				if err != nil {
					return nil, err
				}
				verdict := "drops (no back-pressure)"
				if p.QdiscBacklog > 0 && p.DeviceDropped == 0 {
					verdict = "back-pressures the qdisc"
				}
				r.Tables = []testbed.Table{{Title: "TUN with a reader that does not read", Columns: []string{"sent", "txqueuelen", "held in ring", "qdisc backlog", "device TX dropped", "verdict"},
					Rows: [][]string{{strconv.Itoa(p.Sent), strconv.Itoa(p.TxQueueLen), strconv.Itoa(p.RingHeld), strconv.Itoa(p.QdiscBacklog), strconv.FormatUint(p.DeviceDropped, 10), verdict}}}}
				r.Data = p
				r.Environment = testbed.CaptureEnvironment(nil, env, nil)
				r.Duration = time.Since(r.Started)
				return r, nil
			}
		}})
}
