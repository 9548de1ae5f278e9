// bgprobecost_remote_test.go: the QUIC/UDP class's probes cost no more
// than the class itself moved (issue 62's N5: 14 one-byte datagrams 1.5 s
// apart from the background lane made the controller send 635× their
// bytes in probes).
package daemon_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// N5: a trickle of one-byte datagrams buys at most its own bytes of probes.
func TestBackgroundProbesBoundedByTheFlow(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, _ := remotePath(t, uplinkBottleneck)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	const n = 14
	out, err := p.A.Command(lanesBin, "run", "--socket", sock, "--lane", "background", "--",
		lanesBin, "lab", "helper", "ping", "--to", fmt.Sprintf("%s:9", p.AddrB),
		"--count", fmt.Sprint(n), "--interval", "1500ms", "--size", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("ping: %v %s", err, out)
	}
	var bs bgudp.Status
	if err := json.Unmarshal(status(t, sock).Details["background-udp"], &bs); err != nil {
		t.Fatal(err)
	}
	var probes, sent uint64
	for _, e := range bs.Running {
		probes, sent = probes+e.ProbeBytes, sent+e.Probes
	}
	for _, e := range bs.Last {
		probes, sent = probes+e.ProbeBytes, sent+e.Probes
	}
	const wire = n * (1 + 8 + 20 + 14) // the flow's frames as the class counts them
	t.Logf("a flow of %d one-byte datagrams (%d bytes on the wire): %d probes, %d bytes (%.2f per byte; goal <= 1)",
		n, wire, sent, probes, float64(probes)/wire)
	if probes > wire {
		t.Errorf("probes took %d bytes for a flow of %d", probes, wire)
	}
}
