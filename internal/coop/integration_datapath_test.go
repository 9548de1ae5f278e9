// Integration test (root): the controllers' caps reach real sockets through
// the datapath's sock_ops program (TCP_BPF_SNDCWND_CLAMP), as seen by the
// TCP monitor: every capped upload's cwnd stays at or below its cap.
package coop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestIntegrationClampsRealConnections(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("integration test")
	}
	l := newLAN(t, 3)
	l.sinkServer(t, 5002)
	dps := openDatapaths(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := integrationConfig()
	cfg.APRate = 2e9 // caps of a few segments on veth RTTs, well below what cwnd would reach
	hs := startControllers(t, ctx, l, cfg, func(i int) Options { return Options{Up: dps[i].Caps, Down: dps[i].Caps, Ack: dps[i].Trees} })
	for i := range l.hosts {
		l.upload(t, ctx, i, 5002)
	}
	waitFor(t, hs, "N=3 with caps", 5*time.Second, func() bool {
		for _, h := range hs {
			st := h.c.Status()
			if st.N != 3 || !st.Capping || len(st.Flows) == 0 || st.Flows[0].Cap == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // a few hundred RTTs for the clamp to act
	checked := 0
	for i, h := range hs {
		checked += checkUnderCaps(t, i, h)
		st, err := dps[i].Stats()
		if err == nil && st.Sockops["cap_set"] == 0 {
			t.Errorf("host %d: sock_ops never applied a cap: %v", i, st.Sockops)
		}
	}
	if checked == 0 {
		t.Fatal("no capped upload seen by the monitor")
	}
	t.Logf("%d samples of capped uploads, all at or below their caps", checked)
}

// openDatapaths opens a datapath on each host's LAN interface (state in a
// temporary directory), closed when the test ends; it skips the test where
// the datapath is not available.
func openDatapaths(t *testing.T, l *lan) []*datapath.Datapath {
	t.Helper()
	stateDir := t.TempDir()
	var dps []*datapath.Datapath
	for i, ns := range l.hosts {
		var d *datapath.Datapath
		err := ns.Run(func() (err error) {
			d, err = datapath.Open(datapath.Config{StateDir: stateDir, Interface: "lan0", Instance: fmt.Sprintf("coopit%d", i)})
			return err
		})
		if err != nil {
			t.Skipf("datapath not available here: %v", err)
		}
		t.Cleanup(func() { d.Close() })
		dps = append(dps, d)
	}
	return dps
}

// checkUnderCaps samples host i's sockets 10 times, 30 ms apart, and
// reports every capped established upload (past its first MB) whose cwnd
// is above its cap. It returns how many such samples it checked.
func checkUnderCaps(t *testing.T, i int, h *ihost) int {
	t.Helper()
	caps := map[uint64]uint32{}
	for _, f := range h.c.Status().Flows {
		caps[f.Cookie] = f.Cap
	}
	checked := 0
	var over []string
	for k := 0; k < 10; k++ {
		flows, err := h.smp.Sample()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			c, ok := caps[f.Cookie]
			if !ok || c == 0 || f.State != "ESTAB" || f.BytesAcked < 1<<20 {
				continue
			}
			checked++
			if k == 0 {
				t.Logf("host %d cookie %d: cap %d cwnd %d min_rtt %d us", i, f.Cookie, c, f.Cwnd, f.MinRTT)
			}
			if f.Cwnd > c {
				over = append(over, fmt.Sprintf("cookie %d cwnd %d > cap %d", f.Cookie, f.Cwnd, c))
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	if len(over) > 0 {
		t.Errorf("host %d: cwnd above the cap: %v", i, over)
	}
	return checked
}
