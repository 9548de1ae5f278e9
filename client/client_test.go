// client_test.go: the client against the daemon's real API server
// (internal/apiserver) with a table for a daemon: Start holds the command
// until the daemon moved it, the client redials a daemon that restarted,
// Events reports registrations as they come and go.
package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/apiserver"
)

// daemon is a table for a daemon: its registrations, and the command line
// of each process it was asked to move, read when it was asked.
type daemon struct {
	mu      sync.Mutex
	flows   []client.FlowInfo
	movedAs map[int]string
}

var errNotHere = errors.New("not in this test")

func (d *daemon) Status() (*client.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &client.Status{Version: "test", Flows: append([]client.FlowInfo(nil), d.flows...)}, nil
}
func (d *daemon) Flows() ([]client.FlowInfo, error) {
	st, err := d.Status()
	return st.Flows, err
}
func (d *daemon) Register(c apiserver.Cred, f client.Flow, l client.Lane) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flows = append(d.flows, client.FlowInfo{Flow: f, Lane: l, Source: "api", UID: c.UID})
	return nil
}
func (d *daemon) Unregister(_ apiserver.Cred, f client.Flow) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.flows {
		if d.flows[i].Flow == f {
			d.flows = append(d.flows[:i], d.flows[i+1:]...)
			return nil
		}
	}
	return errors.New("no such flow")
}
func (d *daemon) MovePID(_ apiserver.Cred, pid int, l client.Lane, keep bool) (client.Moved, error) {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	d.mu.Lock()
	defer d.mu.Unlock()
	d.movedAs[pid] = string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	return client.Moved{Processes: 1, Sched: "nice 19"}, err
}
func (d *daemon) LaneCgroup(client.Lane) (string, error)               { return "", errNotHere }
func (d *daemon) SocketLanes([]uint64) (map[uint64]client.Lane, error) { return nil, errNotHere }
func (d *daemon) Component(string) (json.RawMessage, error)            { return nil, errNotHere }
func (d *daemon) Owners() apiserver.Owners                             { return owners{} }
func (d *daemon) Access() apiserver.Access                             { return apiserver.Access{} }
func (d *daemon) SocketReasons([]uint64) (map[uint64]string, error)    { return nil, errNotHere }
func (d *daemon) SocketAppCCs([]uint64) map[uint64]string              { return nil }
func (d *daemon) OwnCCs() map[string]string                            { return nil }
func (d *daemon) UDPFlows(int) ([]client.UDPFlow, int, error)          { return nil, 0, errNotHere }

// owners: every process and flow is the caller's.
type owners struct{}

func (owners) FlowOwners(client.Flow) ([]uint32, error) { return []uint32{uint32(os.Getuid())}, nil }
func (owners) ProcessOwner(int) (uint32, error)         { return uint32(os.Getuid()), nil }
func (owners) GroupID(string) (uint32, bool)            { return 0, false }
func (owners) LanesProcess(int) bool                    { return false }

// serve runs the API server with d on path until stop or the test's end.
func serve(t *testing.T, path string, d *daemon) (stop func()) {
	t.Helper()
	s, err := apiserver.Listen(path, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); s.Close(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func newDaemon(t *testing.T) (*daemon, string) {
	d := &daemon{movedAs: map[int]string{}}
	path := filepath.Join(t.TempDir(), "lanes.sock")
	serve(t, path, d)
	return d, path
}

// Start: the process the daemon moves is still the gate, not the program;
// the program runs after, with its arguments.
func TestStartMovesBeforeTheProgramRuns(t *testing.T) {
	d, path := newDaemon(t)
	c := client.New(path)
	defer c.Close()
	var out bytes.Buffer
	cmd := exec.Command("echo", "hello", "from the lane")
	cmd.Stdout = &out
	if err := c.Run(cmd, client.Background); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello from the lane\n" {
		t.Errorf("the command wrote %q", out.String())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.movedAs) != 1 {
		t.Fatalf("moves: %v", d.movedAs)
	}
	for pid, as := range d.movedAs {
		if pid != cmd.Process.Pid || !strings.HasPrefix(as, "sh -c ") {
			t.Errorf("moved pid %d as %q; want the command's pid %d still in its gate (sh -c ...)", pid, as, cmd.Process.Pid)
		}
	}
}

// A client whose daemon restarted answers again at the next request.
func TestClientRedialsARestartedDaemon(t *testing.T) {
	d := &daemon{movedAs: map[int]string{}}
	path := filepath.Join(t.TempDir(), "lanes.sock")
	stop := serve(t, path, d)
	c := client.New(path)
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := c.Ping(); err == nil {
		t.Fatal("ping answered with the daemon stopped")
	}
	serve(t, path, d)
	if err := c.Ping(); err != nil {
		t.Fatalf("ping after the daemon came back: %v", err)
	}
}

// Events: the daemon at first, then each registration made and removed.
func TestEventsReportRegistrations(t *testing.T) {
	_, path := newDaemon(t)
	c := client.New(path)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs := c.Events(ctx, 100*time.Millisecond)
	next := func(kind string) client.Event {
		t.Helper()
		ev, ok := <-evs
		if !ok || ev.Kind != kind {
			t.Fatalf("event %+v (open %v); want %s", ev, ok, kind)
		}
		return ev
	}
	if ev := next(client.EventDaemon); !strings.HasPrefix(ev.Text, "test, policy") {
		t.Errorf("daemon event %q", ev.Text)
	}
	f := client.Flow{Dst: "192.0.2.1", DPort: 443, SPort: 40000, Proto: "tcp"}
	other := client.New(path)
	defer other.Close()
	if err := other.Register(f, client.Background); err != nil {
		t.Fatal(err)
	}
	if ev := next(client.EventRegistered); ev.Flow.Flow != f || ev.Flow.Lane != client.Background {
		t.Errorf("registered %+v", ev.Flow)
	}
	if err := other.Unregister(f); err != nil {
		t.Fatal(err)
	}
	if ev := next(client.EventUnregistered); ev.Flow.Flow != f {
		t.Errorf("unregistered %+v", ev.Flow)
	}
}
