// rawread_test.go: the raw reader (rawread.go) reports truncation and the
// end of its receive timeout, and never holds up a garbage collection: with
// preemption signals, and without them (GODEBUG=asyncpreemptoff=1) where
// only its receive timeout lets a stop-the-world in.
package rtlane

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestRawRecvTruncates(t *testing.T) {
	cl, sv := seqpacketPair(t)
	if err := setRawReadBound(sv); err != nil {
		t.Fatal(err)
	}
	_ = unix.Sendmsg(cl, make([]byte, 100), nil, nil, 0)
	buf := make([]byte, 10)
	n, flags, err := rawRecv(sv, buf)
	if err != nil || n != 10 || flags&unix.MSG_TRUNC == 0 {
		t.Fatalf("100 bytes into 10: n %d flags %#x err %v, want 10, MSG_TRUNC", n, flags, err)
	}
	// Nothing there: the bound ends the wait with EAGAIN.
	for {
		_, _, err := rawRecv(sv, buf)
		if err == unix.EINTR { // a signal of the runtime's
			continue
		}
		if err != unix.EAGAIN {
			t.Fatalf("empty socket: %v, want EAGAIN after the receive timeout", err)
		}
		break
	}
}

// TestRawReaderLetsGCIn runs rawReaderGC in two child processes, with
// the runtime's preemption signals and without them
// (GODEBUG=asyncpreemptoff=1, where only the receive timeout lets a
// stop-the-world in), and kills a child that does not finish: a stuck
// stop-the-world freezes every goroutine of its process, a watchdog too.
func TestRawReaderLetsGCIn(t *testing.T) {
	if os.Getenv("LANES_RAWREAD_CHILD") != "" {
		rawReaderGC(t)
		return
	}
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	for _, godebug := range []string{"", "asyncpreemptoff=1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRawReaderLetsGCIn$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LANES_RAWREAD_CHILD="+socketDir(t), "GODEBUG="+godebug)
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Errorf("GODEBUG=%q: %v (killed after 3 minutes if it hung)\n%s", godebug, err, out)
		}
	}
}

// rawReaderGC: granted clients connected to a lane with raw_read, their
// readers blocked in raw reads; collections must complete, the lane must
// have raised GOMAXPROCS for them, and every client must be served after.
// No namespaces (a killed child could not remove them): the lane's sockets
// in this one, and its datagrams to a receiver on loopback; the socket in
// the directory the parent made and removes.
func rawReaderGC(t *testing.T) {
	const clients = 3
	rx, err := ListenReceiver(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	cfg := DefaultConfig()
	cfg.Enabled, cfg.RawRead, cfg.Rate = true, true, 1_000_000_000
	cfg.Socket = filepath.Join(os.Getenv("LANES_RAWREAD_CHILD"), "rt.sock")
	l := runLane(t, cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	var cs []*rtclient.Client
	for i := 0; i < clients; i++ {
		c, err := rtclient.Dial(cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// One request each: the reader runs, so it has raised GOMAXPROCS.
		if res, err := c.SendWithin(uint32(i+1), rx.Addr, time.Second, []byte("x")); err != nil || !res.Admitted {
			t.Fatalf("client %d before: %+v %v", i, res, err)
		}
		cs = append(cs, c)
	}
	if got, want := runtime.GOMAXPROCS(0), wantProcs(clients); got < want {
		t.Errorf("GOMAXPROCS %d with %d raw readers, want at least %d", got, clients, want)
	}
	if st := l.rawReaders.Load(); st != clients {
		t.Errorf("%d raw readers, want %d", st, clients)
	}
	time.Sleep(20 * time.Millisecond) // the readers block again
	for i := 0; i < 20; i++ {
		runtime.GC()
	}
	for i, c := range cs {
		if res, err := c.SendWithin(uint32(i+1), rx.Addr, time.Second, []byte("y")); err != nil || !res.Admitted {
			t.Errorf("client %d after the collections: %+v %v", i, res, err)
		}
	}
}
