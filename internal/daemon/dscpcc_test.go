// dscpcc_test.go: a TCP socket that marks itself DSCP LE runs the
// background lane's congestion control, as one put there by a rule does.
package daemon_test

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

// dialTOS connects from ns to addr with IP_TOS tos set before connect.
func dialTOS(t *testing.T, ns *testutil.NetNS, addr string, tos int) net.Conn {
	var c net.Conn
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TOS, tos) }); err != nil {
			return err
		}
		return serr
	}}
	ns.Do(t, func() (err error) { c, err = d.Dial("tcp4", addr); return })
	t.Cleanup(func() { c.Close() })
	return c
}

var ssCongestion = regexp.MustCompile(`(?m)^\s+(\S+)\s`)

// kernelCC is the congestion control ss reads for ns's established TCP
// socket from local port port.
func kernelCC(t *testing.T, ns *testutil.NetNS, port int) string {
	out, err := ns.Command("ss", "-tinH", "state", "established", fmt.Sprintf("sport = :%d", port)).Output()
	m := ssCongestion.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("ss for local port %d: %v\n%s", port, err, out)
	}
	return m[1]
}

// TestDSCPLESocketRunsBackgroundCC: a socket marking itself DSCP LE
// (IP_TOS 0x04) was background by its packets' marking, but kept the
// system's congestion control (bbr, cubic): sock_ops resolved it
// unmatched. sock_ops now reads its marking at connect, so it runs the
// background lane's LEDBAT++ as the monitor says; an unmarked socket
// beside it keeps the system's.
func TestDSCPLESocketRunsBackgroundCC(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnlessCommand(t, "ss")
	p := testutil.NewVethPair(t)
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	_, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	bgCC := ""
	for _, it := range status(t, sock).Interfaces {
		if name, ok := strings.CutPrefix(it.BackgroundCC, "LEDBAT++ "); ok {
			bgCC, _, _ = strings.Cut(name, ",")
		}
	}
	if bgCC == "" {
		t.Skip("no LEDBAT++ congestion control here (struct_ops): background sockets keep the system's")
	}
	addr := fmt.Sprintf("%s:8080", p.AddrB)
	marked := dialTOS(t, p.A, addr, 0x04).LocalAddr().(*net.TCPAddr).Port
	plain := dialTOS(t, p.A, addr, 0).LocalAddr().(*net.TCPAddr).Port

	if cc := kernelCC(t, p.A, marked); cc != bgCC {
		t.Errorf("the socket marked LE runs %q; the background lane's congestion control is %q", cc, bgCC)
	}
	if cc := kernelCC(t, p.A, plain); cc == bgCC {
		t.Errorf("the unmarked socket runs the background lane's %q", cc)
	}
	if f := monitorTCPFrom(t, p.A, sock, marked); f.Lane != lane.Background || !strings.HasPrefix(f.Why, "DSCP LE") || f.Cong != "ledbat" {
		t.Errorf("lanes monitor: the marked socket in %v, why %q, CC %q; want background, DSCP LE, ledbat", f.Lane, f.Why, f.Cong)
	}
}

// monitorTCPFrom is lanes monitor's one sample of the TCP flow from local
// port port.
func monitorTCPFrom(t *testing.T, ns *testutil.NetNS, sock string, port int) tcpmon.Flow {
	t.Helper()
	out, err := ns.Command(lanesBin, "monitor", "--socket", sock, "--json", "--count", "1", "--sport", fmt.Sprint(port)).Output()
	flows, rerr := tcpmon.ReadFlows(strings.NewReader(string(out)))
	if err != nil || rerr != nil || len(flows) != 1 {
		t.Fatalf("lanes monitor --json --sport %d: %v %v, want one flow:\n%s", port, err, rerr, out)
	}
	return flows[0]
}
