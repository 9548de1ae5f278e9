// bgifb_remote_test.go: a background QUIC download (quic-go) beside a
// foreground download at the remote bottleneck (remote_test.go's path,
// R's TBF 10 Mbit/s toward A holding 600 KB), its arrivals shaped on A's
// IFB (the default) and policed (--bg-udp-rule-off ifb), paired in the
// same run: a daemon each, the same foregrounds (a UDP call and a
// kernel-paced TCP download at 40 % of the link, bgmatrix_test.go's) and
// the same probe. It logs each share of the idle capacity and the probe's
// p95 against the foreground alone, and holds what is robust: the
// arrivals cross the IFB only where shaped, no probe is lost, the
// background moves.
package daemon_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundQUICDownloadIfbRemote(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, downlinkBottleneck)
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	fgs := mxForegrounds[:2] // the call and the kernel-paced stream
	b := newBed(t, p, base, remoteLinkBps, 5202, []string{"down"}, nil)
	alone := map[string]mxBaseline{}
	for _, fg := range fgs {
		r := fg.start(t, b, "down")
		time.Sleep(mxSettleFg)
		m0b, m0s := r.read()
		p95, _, _, _ := probeWithState(t, b)
		m1b, m1s := r.read()
		r.stop()
		alone[fg.name] = mxBaseline{(m1b - m0b) * 8 / max(m1s-m0s, 1e-3), p95}
		t.Logf("%s alone: %.2f Mbit/s, probe p95 %v", fg.name, alone[fg.name].rate/1e6, p95)
	}
	methods := []struct{ name, flag string }{{"IFB-shaped", ""}, {"policed", "ifb"}}
	shares := map[string][]float64{}
	for _, m := range methods {
		var flags []string
		if m.flag != "" {
			flags = []string{"--bg-udp-rule-off", m.flag}
		}
		d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), append(flags, "--log-level", "debug")...)
		b.sock = sock
		q := startQUICBulk(t, p, "down", b.run()...)
		bg := &running{meter: quicMeter{q, time.Now()}, stop: q.stop}
		time.Sleep(mxSettleBg)
		for _, fg := range fgs {
			c := mxCell{bg: "QUIC (quic-go) " + m.name, fg: fg.name, dir: "down",
				baseP95: alone[fg.name].p95, fgAlone: alone[fg.name].rate}
			f := fg.start(t, b, "down")
			time.Sleep(mxSettleFg)
			b0, s0 := bg.read()
			f0, g0 := f.read()
			c.p95, c.lost, c.mode, c.nonTCP = probeWithState(t, b)
			b1, s1 := bg.read()
			f1, g1 := f.read()
			f.stop()
			c.bgRate = (b1 - b0) * 8 / max(s1-s0, 1e-3)
			c.fgBeside = (f1 - f0) * 8 / max(g1-g0, 1e-3)
			shares[m.name] = append(shares[m.name], c.share(b.link))
			mxJudge(t, b, &c)
		}
		st := status(t, sock)
		nt := st.Interfaces[0].NonTCP
		t.Logf("%s: %s", m.name, nt)
		if shaped := strings.Contains(nt, "shaped on arrival"); shaped != (m.flag == "") {
			t.Errorf("%s: status says %q", m.name, nt)
		}
		bg.stop()
		d.stop(t, syscall.SIGTERM)
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String()) // the controller's steps
		}
		time.Sleep(mxDrain)
	}
	var line []string
	for i, fg := range fgs {
		line = append(line, fmt.Sprintf("beside %s: IFB-shaped %.2f, policed %.2f",
			fg.name, shares["IFB-shaped"][i], shares["policed"][i]))
	}
	t.Logf("QUIC download ÷ idle capacity (goal >= 0.90): %s", strings.Join(line, "; "))
}
