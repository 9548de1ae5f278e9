// Tests of the daemon's side of the API: authorization rules, and a real
// server/client round trip on a unix socket with a table-driven handler.
package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// owners is a table-driven Owners.
type owners struct {
	flows map[api.Flow][]uint32
	procs map[int]uint32
	lanes map[int]bool // the daemon's and lanes-rtd's pids
}

func (o owners) FlowOwners(f api.Flow) ([]uint32, error) {
	if u, ok := o.flows[f]; ok {
		return u, nil
	}
	return nil, fmt.Errorf("no local socket %s", f)
}
func (o owners) ProcessOwner(pid int) (uint32, error) {
	if u, ok := o.procs[pid]; ok {
		return u, nil
	}
	return 0, fmt.Errorf("no process %d", pid)
}
func (o owners) LanesProcess(pid int) bool          { return o.lanes[pid] }
func (o owners) GroupID(name string) (uint32, bool) { return 777, name == "lanes" }

func TestAuthorize(t *testing.T) {
	mine := api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	theirs := api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5001}
	shared := api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5002} // same ports from two local addresses
	o := owners{flows: map[api.Flow][]uint32{mine: {1000}, theirs: {1001}, shared: {1000, 0}}, procs: map[int]uint32{10: 1000, 11: 1001}}
	root, user, member := Cred{UID: 0}, Cred{UID: 1000}, Cred{UID: 1002, GID: 1002, Groups: []uint32{5, 777}}
	primary := Cred{UID: 1003, GID: 777}
	grantedMember := Cred{UID: 1000, GID: 1000, Groups: []uint32{777}}
	grantedUser := Cred{UID: 1000, GID: 1000}
	acc := Access{Group: "lanes", RealtimeGrant: func(uid uint32, _ []uint32) bool { return uid == 1000 }}
	for _, tc := range []struct {
		name string
		c    Cred
		r    api.Request
		ok   bool
	}{
		{"anyone reads status", user, api.Request{Op: api.OpStatus}, true},
		{"own flow to background", user, api.Request{Op: api.OpRegister, Flow: &mine, Lane: lane.Background}, true},
		{"own flow to realtime", user, api.Request{Op: api.OpRegister, Flow: &mine, Lane: lane.Realtime}, false},
		{"own flow to interactive", user, api.Request{Op: api.OpRegister, Flow: &mine, Lane: lane.Interactive}, false},
		{"other's flow to background", user, api.Request{Op: api.OpRegister, Flow: &theirs, Lane: lane.Background}, false},
		{"unknown flow", user, api.Request{Op: api.OpRegister, Flow: &api.Flow{Dst: "10.9.9.9", DPort: 1, SPort: 2}, Lane: lane.Background}, false},
		{"unregister own", user, api.Request{Op: api.OpUnregister, Flow: &mine}, true},
		{"unregister other's", user, api.Request{Op: api.OpUnregister, Flow: &theirs}, false},
		{"own pid to background", user, api.Request{Op: api.OpMovePID, PID: 10, Lane: lane.Background}, true},
		{"other's pid", user, api.Request{Op: api.OpMovePID, PID: 11, Lane: lane.Background}, false},
		{"own pid to realtime", user, api.Request{Op: api.OpMovePID, PID: 10, Lane: lane.Realtime}, false},
		{"root anything", root, api.Request{Op: api.OpRegister, Flow: &theirs, Lane: lane.Realtime}, true},
		{"group member", member, api.Request{Op: api.OpMovePID, PID: 11, Lane: lane.Interactive}, true},
		{"group as primary gid", primary, api.Request{Op: api.OpMovePID, PID: 11, Lane: lane.Interactive}, true},
		{"flow shared with root's socket", user, api.Request{Op: api.OpRegister, Flow: &shared, Lane: lane.Background}, false},
		// realtime: the group and a grant, then own only (policy.md "Who may move what")
		{"member's own flow to realtime", member, api.Request{Op: api.OpRegister, Flow: &mine, Lane: lane.Realtime}, false},
		{"member, other's pid to realtime", member, api.Request{Op: api.OpMovePID, PID: 11, Lane: lane.Realtime}, false},
		{"member, PID 1", member, api.Request{Op: api.OpMovePID, PID: 1, Lane: lane.Background}, false},
		{"root, PID 1", root, api.Request{Op: api.OpMovePID, PID: 1, Lane: lane.Realtime}, true},
		{"granted member's own flow to realtime", grantedMember, api.Request{Op: api.OpRegister, Flow: &mine, Lane: lane.Realtime}, true},
		{"granted member's own pid to realtime", grantedMember, api.Request{Op: api.OpMovePID, PID: 10, Lane: lane.Realtime}, true},
		{"granted member, other's flow to realtime", grantedMember, api.Request{Op: api.OpRegister, Flow: &theirs, Lane: lane.Realtime}, false},
		{"granted member, other's pid to realtime", grantedMember, api.Request{Op: api.OpMovePID, PID: 11, Lane: lane.Realtime}, false},
		{"granted member, other's pid to interactive", grantedMember, api.Request{Op: api.OpMovePID, PID: 11, Lane: lane.Interactive}, true},
		{"granted non-member's own flow to realtime", grantedUser, api.Request{Op: api.OpRegister, Flow: &mine, Lane: lane.Realtime}, false},
	} {
		err := Authorize(tc.c, tc.r, o, acc)
		if tc.ok != (err == nil) {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrPermission) {
			t.Errorf("%s: error %v does not wrap ErrPermission", tc.name, err)
		}
	}
}

// A refusal for want of privilege names the policy key that grants it,
// access.group, and says when it is unset or names no group.
func TestPermissionNamesAccessGroup(t *testing.T) {
	mine := api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	o := owners{flows: map[api.Flow][]uint32{mine: {1000}}, procs: map[int]uint32{10: 1000}}
	user := Cred{UID: 1000}
	for _, tc := range []struct {
		group string
		want  string
	}{
		{"", "only root (the policy's access.group is unset; its members would also be allowed) may put"},
		{"staff", `only root (the policy's access.group "staff" is no group on this machine) may put`},
		{"lanes", `only root or members of the policy's access.group "lanes" may put`},
	} {
		for _, r := range []api.Request{{Op: api.OpRegister, Flow: &mine, Lane: lane.Interactive}, {Op: api.OpMovePID, PID: 10, Lane: lane.Interactive}} {
			err := Authorize(user, r, o, Access{Group: tc.group})
			if err == nil || !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("group %q, %s: %v; want ...%s...", tc.group, r.Op, err, tc.want)
			}
		}
	}
}

// handler records what the server asks of it.
type handler struct {
	mu    sync.Mutex
	flows []api.FlowInfo
	o     owners
	acc   Access
}

func (h *handler) Status() (*api.Status, error) { return &api.Status{Version: "test"}, nil }
func (h *handler) Flows() ([]api.FlowInfo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]api.FlowInfo(nil), h.flows...), nil
}
func (h *handler) Register(c Cred, f api.Flow, l lane.Lane) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flows = append(h.flows, api.FlowInfo{Flow: f, Lane: l, Source: "api", UID: c.UID})
	return nil
}
func (h *handler) Unregister(Cred, api.Flow) error                       { return errors.New("no such flow") }
func (h *handler) MovePID(Cred, int, lane.Lane, bool) (api.Moved, error) { panic("bug") }
func (h *handler) LaneCgroup(l lane.Lane) (string, error) {
	return "/sys/fs/cgroup/x/" + l.String(), nil
}
func (h *handler) Owners() Owners { return h.o }
func (h *handler) Component(name string) (json.RawMessage, error) {
	if name != "coop" {
		return nil, fmt.Errorf("component %q is not running", name)
	}
	return json.RawMessage(`{"n":3}`), nil
}
func (h *handler) SocketLanes(c []uint64) (map[uint64]lane.Lane, error) {
	out := map[uint64]lane.Lane{}
	for _, k := range c {
		if k%2 == 0 {
			out[k] = lane.Background
		}
	}
	return out, nil
}
func (h *handler) Access() Access { return h.acc }

// SocketAppCCs: every fourth cookie's app asked for "cubic".
func (h *handler) SocketAppCCs(c []uint64) map[uint64]string {
	out := map[uint64]string{}
	for _, k := range c {
		if k%4 == 0 {
			out[k] = "cubic"
		}
	}
	return out
}
func (h *handler) OwnCCs() map[string]string { return map[string]string{"lanes_0000abcd": "ledbat"} }

func (h *handler) SocketReasons([]uint64) (map[uint64]string, error) { return nil, nil }
func (h *handler) UDPFlows(int) ([]api.UDPFlow, int, error)          { return nil, 0, nil }

// checkFlowOps registers f, lists it, and checks the server's errors and
// the answers of socket lanes (more than one request's worth) and
// components.
func checkFlowOps(t *testing.T, c *client.Client, f api.Flow) {
	t.Helper()
	if err := c.Register(f, lane.Background); err != nil {
		t.Fatal(err)
	}
	fl, err := c.Flows()
	f.Proto = "tcp" // the API's default made explicit
	if err != nil || len(fl) != 1 || fl[0].Flow != f || fl[0].UID != uint32(os.Getuid()) {
		t.Fatalf("flows = %+v, %v", fl, err)
	}
	if err := c.Unregister(f); err == nil || !strings.Contains(err.Error(), "no such flow") {
		t.Fatalf("unregister error not passed back: %v", err)
	}
	cookies := make([]uint64, 5000) // more than one request's worth
	for i := range cookies {
		cookies[i] = uint64(i) + 1<<60
	}
	sl, err := c.SocketLanes(cookies)
	if err != nil || len(sl) != 2500 || sl[1<<60] != lane.Background {
		t.Fatalf("socket lanes: %d entries, %v", len(sl), err)
	}
	si, err := c.SocketInfo(cookies)
	if err != nil || len(si.Lanes) != 2500 || len(si.AppCC) != 1250 || si.AppCC[1<<60] != "cubic" ||
		si.CCNames["lanes_0000abcd"] != "ledbat" {
		t.Fatalf("socket info: %d lanes, %d app CCs, names %v, %v", len(si.Lanes), len(si.AppCC), si.CCNames, err)
	}
	if doc, err := c.Component("coop"); err != nil || string(doc) != `{"n":3}` {
		t.Fatalf("component coop: %s, %v", doc, err)
	}
	if _, err := c.Component("nosuch"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("component nosuch: %v", err)
	}
}

// checkGarbageReplies sends raw garbage on a new connection to the server
// at path: it must get error replies, in order.
func checkGarbageReplies(t *testing.T, path string) {
	t.Helper()
	raw, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "not json\n{\"op\":\"ping\"}\n%s\n", strings.Repeat("x", api.MaxLine+10))
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "longer than") {
		n, err := raw.Read(buf)
		if err != nil {
			break
		}
		got.Write(buf[:n])
	}
	lines := strings.Split(strings.TrimSpace(got.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "bad request") || lines[1] != `{"ok":true}` || !strings.Contains(lines[2], "longer than") {
		t.Fatalf("replies = %q", lines)
	}
}

// serve listens on path with h and serves until the test ends.
func serve(t *testing.T, path string, h Handler) *Server {
	t.Helper()
	s, err := Listen(path, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); s.Close(); <-done })
	return s
}

func TestServerRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lanes.sock")
	f := api.Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	h := &handler{o: owners{flows: map[api.Flow][]uint32{f: {uint32(os.Getuid())}}}}
	serve(t, path, h)
	if _, err := Listen(path, h, nil); err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Fatalf("second listener: %v", err)
	}
	c, err := client.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	checkFlowOps(t, c, f)
	// A panicking handler gives an error reply and the daemon lives on.
	if _, err := c.Move(os.Getpid(), lane.Background, true); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("panic not contained: %v", err)
	}
	if err := c.Ping(); err != nil {
		t.Fatalf("server dead after panic: %v", err)
	}

	checkGarbageReplies(t, path)
	if err := c.Ping(); err != nil {
		t.Fatalf("server dead after garbage: %v", err)
	}
}

// TestAttackMoveLanesOwnProcesses (N17): an access-group member with no
// grant moved lanes-rtd to background (SCHED_OTHER nice 19; root's
// realtime sends' p99 went from 112 µs to 13.8 ms). Fix: only root moves
// the daemon or a process it started.
func TestAttackMoveLanesOwnProcesses(t *testing.T) {
	const rtd = 20
	o := owners{procs: map[int]uint32{rtd: 0, 10: 1000}, lanes: map[int]bool{rtd: true}}
	acc := Access{Group: "lanes", RealtimeGrant: func(uint32, []uint32) bool { return true }}
	member := Cred{UID: 1002, GID: 1002, Groups: []uint32{777}}
	for _, l := range []lane.Lane{lane.Background, lane.Interactive, lane.Realtime} {
		if err := Authorize(member, api.Request{Op: api.OpMovePID, PID: rtd, Lane: l}, o, acc); err == nil {
			t.Errorf("a member may move lanes-rtd to %s", l)
		}
	}
	if err := Authorize(Cred{UID: 0}, api.Request{Op: api.OpMovePID, PID: rtd, Lane: lane.Background}, o, acc); err != nil {
		t.Errorf("root may not move lanes-rtd: %v", err)
	}
	if err := Authorize(member, api.Request{Op: api.OpMovePID, PID: 10, Lane: lane.Background}, o, acc); err != nil {
		t.Errorf("a member may no longer move another process: %v", err)
	}
}
