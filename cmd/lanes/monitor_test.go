// monitor_test.go: `lanes monitor` shows the lanes the daemon knows for the
// sampled sockets (asked over the daemon's API socket) and filters by them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// laneHandler answers socket-lanes requests from a map; the daemon's
// other operations are not needed by the monitor.
type laneHandler struct {
	lanes    map[uint64]lane.Lane
	asked    int
	yielding atomic.Bool // the background component says the yield holds background
	backlog  atomic.Bool // the status says the background lane holds a backlog
}

var errNotHere = errors.New("not in this test")

func (h *laneHandler) Status() (*api.Status, error) {
	var b uint64
	if h.backlog.Load() {
		b = 3028
	}
	return &api.Status{Interfaces: []api.InterfaceStatus{{Name: "veth0", Lanes: []api.LaneStats{
		{Lane: lane.Interactive, BacklogBytes: 12112}, {Lane: lane.Background, BacklogBytes: b}}}}}, nil
}
func (h *laneHandler) Flows() ([]api.FlowInfo, error)                     { return nil, errNotHere }
func (h *laneHandler) Register(apiserver.Cred, api.Flow, lane.Lane) error { return errNotHere }
func (h *laneHandler) Unregister(apiserver.Cred, api.Flow) error          { return errNotHere }
func (h *laneHandler) MovePID(apiserver.Cred, int, lane.Lane, bool) (api.Moved, error) {
	return api.Moved{}, errNotHere
}
func (h *laneHandler) LaneCgroup(lane.Lane) (string, error)    { return "", errNotHere }
func (h *laneHandler) Owners() apiserver.Owners                { return nil }
func (h *laneHandler) Access() apiserver.Access                { return apiserver.Access{} }
func (h *laneHandler) SocketAppCCs([]uint64) map[uint64]string { return nil }
func (h *laneHandler) OwnCCs() map[string]string               { return nil }
func (h *laneHandler) SocketReasons([]uint64) (map[uint64]string, error) {
	return nil, nil
}
func (h *laneHandler) UDPFlows(int) ([]api.UDPFlow, int, error) { return nil, 0, nil }
func (h *laneHandler) Component(name string) (json.RawMessage, error) {
	if name == "background" {
		return json.RawMessage(fmt.Sprintf(`{"yielding":%v}`, h.yielding.Load())), nil
	}
	return nil, errNotHere
}
func (h *laneHandler) SocketLanes(c []uint64) (map[uint64]lane.Lane, error) {
	h.asked += len(c)
	out := map[uint64]lane.Lane{}
	for _, k := range c {
		if l, ok := h.lanes[k]; ok {
			out[k] = l
		}
	}
	return out, nil
}

func socketCookie(t *testing.T, c net.Conn) uint64 {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cookie uint64
	var serr error
	rc.Control(func(fd uintptr) { cookie, serr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) })
	if serr != nil {
		t.Fatalf("SO_COOKIE: %v", serr)
	}
	return cookie
}

func TestMonitorLanesFromDaemon(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &laneHandler{lanes: map[uint64]lane.Lane{socketCookie(t, c): lane.Background}}
	sock := filepath.Join(t.TempDir(), "lanes.sock")
	srv, err := apiserver.Listen(sock, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx)
	defer srv.Close()

	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	out, stderr, code := runLanes(t, "monitor", "--socket", sock, "--port", port, "--json", "--count", "3", "--interval", "20ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	flows, err := tcpmon.ReadFlows(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	byLane := map[lane.Lane]int{}
	for _, f := range flows {
		byLane[f.Lane]++
	}
	// 2 sockets x 3 samples: the client's in background, the server's
	// (unknown to the daemon) in the default lane.
	if byLane[lane.Background] != 3 || byLane[lane.Interactive] != 3 {
		t.Errorf("lanes %v, want 3 background and 3 interactive", byLane)
	}
	if h.asked > 4 {
		t.Errorf("daemon asked about %d cookies for 2 sockets in 3 samples: no caching?", h.asked)
	}
	// While the yield holds background, background flows are held.
	for _, yielding := range []bool{false, true} {
		h.yielding.Store(yielding)
		out, _, _ := runLanes(t, "monitor", "--socket", sock, "--port", port, "--json", "--count", "1")
		flows, err := tcpmon.ReadFlows(strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			if f.Held != (yielding && f.Lane == lane.Background) || f.Queued {
				t.Errorf("yielding %v, no backlog: %s flow held %v, queued %v", yielding, f.Lane, f.Held, f.Queued)
			}
		}
	}
	// While the background lane holds a backlog, background flows are queued.
	h.yielding.Store(false)
	h.backlog.Store(true)
	out, _, _ = runLanes(t, "monitor", "--socket", sock, "--port", port, "--json", "--count", "1")
	if flows, err = tcpmon.ReadFlows(strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		if f.Queued != (f.Lane == lane.Background) || f.Held {
			t.Errorf("a background backlog: %s flow queued %v, held %v", f.Lane, f.Queued, f.Held)
		}
	}
	out, _, code = runLanes(t, "monitor", "--socket", sock, "--port", port, "--json", "--count", "2", "--lane", "background")
	flows, err = tcpmon.ReadFlows(strings.NewReader(out))
	if code != 0 || err != nil || len(flows) != 2 || flows[0].Lane != lane.Background {
		t.Errorf("--lane background: exit %d, %v, %+v", code, err, flows)
	}
	if _, stderr, code := runLanes(t, "monitor", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--lane", "background", "--count", "1"); code != 1 || !strings.Contains(stderr, "daemon") {
		t.Errorf("--lane without a daemon: exit %d, %q", code, stderr)
	}
}
