// helper_test.go: the helpers' own socket option, an application's
// congestion control set after connect, on a loopback connection.
package testbed

import (
	"net"
	"os"
	"strings"
	"testing"
)

// AppSetCC sets the congestion control on the connected socket and reads
// back what the socket runs; a name the kernel does not know is an error.
func TestAppSetCC(t *testing.T) {
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil || !strings.Contains(string(avail), "reno") {
		t.Skipf("reno not available (%v)", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		name, want string
		fails      bool
	}{
		{"reno", "reno", false},
		{"no-such-cc", "", true},
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppSetCC(conn, c.name)
		conn.Close()
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("AppSetCC(%q) = %q, %v; want %q, error %v", c.name, got, err, c.want, c.fails)
		}
	}
}
