// owner_test.go: a socket opened after the monitor's last process scan
// gets its owner at the next scan (Config.ProcRefresh: "a new socket's
// process is known at most this late"), through every backend: its first
// lookup, held back by the refresh period, must not be kept as "no owner".
package tcpmon

import (
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestLateSocketGetsItsOwner(t *testing.T) {
	backends := iterBackends(t)
	if err := tcpiter.ProbeTracker(); err == nil {
		backends = append(backends, BackendTrack)
	} else if !errors.Is(err, ebpf.ErrNotSupported) {
		t.Fatalf("tracker probe: %v", err)
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ns := testutil.NewNetNS(t)
			srv := newSink(t, ns, "127.0.0.1:0")
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
			early := dialIn(t, ns, addr)
			refresh := 2 * time.Second
			s := newSampler(t, Config{NetNS: ns.Handle, Backend: backend, Interval: 50 * time.Millisecond,
				ProcRefresh: refresh, Filter: Filter{RemotePort: srv.port()}})
			if _, err := s.Sample(); err != nil { // scans for the early socket's owner
				t.Fatal(err)
			}
			late := dialIn(t, ns, addr)
			early.Write([]byte("x"))
			late.Write([]byte("x"))
			port := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(localPort(late))))
			start := time.Now()
			owned := func(fl []Flow) bool {
				for _, f := range fl {
					if f.Src == port && f.PID == os.Getpid() {
						return true
					}
				}
				return false
			}
			all := sampleUntil(t, s, testutil.Patience(4*refresh+10*time.Second), owned)
			if !owned(all[len(all)-1]) {
				t.Fatalf("the socket opened after the first scan (%s) had no owner in %d samples over %v (refresh %v)",
					port, len(all), time.Since(start).Round(time.Millisecond), refresh)
			}
			t.Logf("%s: the late socket's owner known after %v (%d samples; refresh %v)", backend,
				time.Since(start).Round(time.Millisecond), len(all), refresh)
		})
	}
}
