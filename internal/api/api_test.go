// Tests of the API: request decoding (table + fuzz), authorization rules, and
// a real server/client round trip on a unix socket with a table-driven handler.
package api

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

	"github.com/lanes-net/lanes/internal/lane"
)

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{`{"op":"ping"}`, ""},
		{`{"op":"register","flow":{"dst":"192.0.2.1","dport":443,"sport":40000},"lane":"background"}`, ""},
		{`{"op":"register","flow":{"dst":"2001:db8::1","dport":443,"sport":40000,"proto":"udp"},"lane":"bg"}`, ""},
		{`{"op":"move-pid","pid":42,"lane":"background"}`, ""},
		{``, "bad request"},
		{`{`, "bad request"},
		{`[]`, "bad request"},
		{`{"op":"ping"} {"op":"ping"}`, "trailing data"},
		{`{"op":"launch"}`, `unknown op "launch"`},
		{`{}`, "missing op"},
		{`{"op":"ping","extra":1}`, "unknown field"},
		{`{"op":"register","lane":"background"}`, "needs a flow"},
		{`{"op":"register","flow":{"dst":"x","dport":1,"sport":2},"lane":"background"}`, "not an IP address"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":0},"lane":"background"}`, "sport missing"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":70000,"sport":1},"lane":"background"}`, "bad request"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":1,"proto":"sctp"},"lane":"background"}`, "want tcp or udp"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":1},"lane":"fastest"}`, "unknown lane"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":1}}`, "needs a lane"},
		{`{"op":"move-pid","pid":-3,"lane":"background"}`, "pid > 0"},
		{`{"op":"lane-cgroup"}`, "needs a lane"},
		{`{"op":"component","name":"coop"}`, ""},
		{`{"op":"component"}`, "needs a name"},
	} {
		_, err := DecodeRequest([]byte(tc.in))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("DecodeRequest(%s) = %v; want error containing %q", tc.in, err, tc.err)
		}
	}
	if _, err := DecodeRequest([]byte(strings.Repeat(" ", MaxLine+1))); err == nil {
		t.Error("over-long request accepted")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"op":"register","flow":{"dst":"192.0.2.1","dport":443,"sport":40000},"lane":"background"}`))
	f.Add([]byte(`{"op":"move-pid","pid":1,"lane":"realtime"}`))
	f.Add([]byte(`{"op":"status"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		// Whatever decodes must be a request the handlers can take as is.
		switch r.Op {
		case OpRegister, OpUnregister:
			if r.Flow == nil || r.Flow.Validate() != nil {
				t.Fatalf("accepted bad flow: %s", b)
			}
		case OpMovePID:
			if r.PID <= 0 || r.Lane == lane.Unset {
				t.Fatalf("accepted bad move: %s", b)
			}
		}
	})
}

// owners is a table-driven Owners.
type owners struct {
	flows map[Flow][]uint32
	procs map[int]uint32
	lanes map[int]bool // the daemon's and lanes-rtd's pids
}

func (o owners) FlowOwners(f Flow) ([]uint32, error) {
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
	mine := Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	theirs := Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5001}
	shared := Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5002} // same ports from two local addresses
	o := owners{flows: map[Flow][]uint32{mine: {1000}, theirs: {1001}, shared: {1000, 0}}, procs: map[int]uint32{10: 1000, 11: 1001}}
	root, user, member := Cred{UID: 0}, Cred{UID: 1000}, Cred{UID: 1002, GID: 1002, Groups: []uint32{5, 777}}
	primary := Cred{UID: 1003, GID: 777}
	grantedMember := Cred{UID: 1000, GID: 1000, Groups: []uint32{777}}
	grantedUser := Cred{UID: 1000, GID: 1000}
	acc := Access{Group: "lanes", RealtimeGrant: func(uid uint32, _ []uint32) bool { return uid == 1000 }}
	for _, tc := range []struct {
		name string
		c    Cred
		r    Request
		ok   bool
	}{
		{"anyone reads status", user, Request{Op: OpStatus}, true},
		{"own flow to background", user, Request{Op: OpRegister, Flow: &mine, Lane: lane.Background}, true},
		{"own flow to realtime", user, Request{Op: OpRegister, Flow: &mine, Lane: lane.Realtime}, false},
		{"own flow to interactive", user, Request{Op: OpRegister, Flow: &mine, Lane: lane.Interactive}, false},
		{"other's flow to background", user, Request{Op: OpRegister, Flow: &theirs, Lane: lane.Background}, false},
		{"unknown flow", user, Request{Op: OpRegister, Flow: &Flow{Dst: "10.9.9.9", DPort: 1, SPort: 2}, Lane: lane.Background}, false},
		{"unregister own", user, Request{Op: OpUnregister, Flow: &mine}, true},
		{"unregister other's", user, Request{Op: OpUnregister, Flow: &theirs}, false},
		{"own pid to background", user, Request{Op: OpMovePID, PID: 10, Lane: lane.Background}, true},
		{"other's pid", user, Request{Op: OpMovePID, PID: 11, Lane: lane.Background}, false},
		{"own pid to realtime", user, Request{Op: OpMovePID, PID: 10, Lane: lane.Realtime}, false},
		{"root anything", root, Request{Op: OpRegister, Flow: &theirs, Lane: lane.Realtime}, true},
		{"group member", member, Request{Op: OpMovePID, PID: 11, Lane: lane.Interactive}, true},
		{"group as primary gid", primary, Request{Op: OpMovePID, PID: 11, Lane: lane.Interactive}, true},
		{"flow shared with root's socket", user, Request{Op: OpRegister, Flow: &shared, Lane: lane.Background}, false},
		// realtime: the group and a grant, then own only (policy.md "Who may move what")
		{"member's own flow to realtime", member, Request{Op: OpRegister, Flow: &mine, Lane: lane.Realtime}, false},
		{"member, other's pid to realtime", member, Request{Op: OpMovePID, PID: 11, Lane: lane.Realtime}, false},
		{"member, PID 1", member, Request{Op: OpMovePID, PID: 1, Lane: lane.Background}, false},
		{"root, PID 1", root, Request{Op: OpMovePID, PID: 1, Lane: lane.Realtime}, true},
		{"granted member's own flow to realtime", grantedMember, Request{Op: OpRegister, Flow: &mine, Lane: lane.Realtime}, true},
		{"granted member's own pid to realtime", grantedMember, Request{Op: OpMovePID, PID: 10, Lane: lane.Realtime}, true},
		{"granted member, other's flow to realtime", grantedMember, Request{Op: OpRegister, Flow: &theirs, Lane: lane.Realtime}, false},
		{"granted member, other's pid to realtime", grantedMember, Request{Op: OpMovePID, PID: 11, Lane: lane.Realtime}, false},
		{"granted member, other's pid to interactive", grantedMember, Request{Op: OpMovePID, PID: 11, Lane: lane.Interactive}, true},
		{"granted non-member's own flow to realtime", grantedUser, Request{Op: OpRegister, Flow: &mine, Lane: lane.Realtime}, false},
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
	mine := Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	o := owners{flows: map[Flow][]uint32{mine: {1000}}, procs: map[int]uint32{10: 1000}}
	user := Cred{UID: 1000}
	for _, tc := range []struct {
		group string
		want  string
	}{
		{"", "only root (the policy's access.group is unset; its members would also be allowed) may put"},
		{"staff", `only root (the policy's access.group "staff" is no group on this machine) may put`},
		{"lanes", `only root or members of the policy's access.group "lanes" may put`},
	} {
		for _, r := range []Request{{Op: OpRegister, Flow: &mine, Lane: lane.Interactive}, {Op: OpMovePID, PID: 10, Lane: lane.Interactive}} {
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
	flows []FlowInfo
	o     owners
	acc   Access
}

func (h *handler) Status() (*Status, error) { return &Status{Version: "test"}, nil }
func (h *handler) Flows() ([]FlowInfo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]FlowInfo(nil), h.flows...), nil
}
func (h *handler) Register(c Cred, f Flow, l lane.Lane) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flows = append(h.flows, FlowInfo{Flow: f, Lane: l, Source: "api", UID: c.UID})
	return nil
}
func (h *handler) Unregister(Cred, Flow) error                       { return errors.New("no such flow") }
func (h *handler) MovePID(Cred, int, lane.Lane, bool) (Moved, error) { panic("bug") }
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

// checkFlowOps registers f, lists it, and checks the server's errors and
// the answers of socket lanes (more than one request's worth) and
// components.
func checkFlowOps(t *testing.T, c *Client, f Flow) {
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
	fmt.Fprintf(raw, "not json\n{\"op\":\"ping\"}\n%s\n", strings.Repeat("x", MaxLine+10))
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
	f := Flow{Dst: "10.0.0.1", DPort: 80, SPort: 5000}
	h := &handler{o: owners{flows: map[Flow][]uint32{f: {uint32(os.Getuid())}}}}
	serve(t, path, h)
	if _, err := Listen(path, h, nil); err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Fatalf("second listener: %v", err)
	}
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	checkFlowOps(t, c, f)
	// A panicking handler gives an error reply and the daemon lives on.
	if err := c.MovePID(os.Getpid(), lane.Background); err == nil || !strings.Contains(err.Error(), "internal error") {
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
		if err := Authorize(member, Request{Op: OpMovePID, PID: rtd, Lane: l}, o, acc); err == nil {
			t.Errorf("a member may move lanes-rtd to %s", l)
		}
	}
	if err := Authorize(Cred{UID: 0}, Request{Op: OpMovePID, PID: rtd, Lane: lane.Background}, o, acc); err != nil {
		t.Errorf("root may not move lanes-rtd: %v", err)
	}
	if err := Authorize(member, Request{Op: OpMovePID, PID: 10, Lane: lane.Background}, o, acc); err != nil {
		t.Errorf("a member may no longer move another process: %v", err)
	}
}
