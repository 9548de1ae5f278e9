// Tests of `lanes rt send` and `lanes rt stats` against an in-process
// realtime lane in a fresh namespace.
package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/rtlane/rtlanetest"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

func TestRTSendStats(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx := rtlanetest.Start(t)
	ctx := context.Background()

	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	rc := runMain(ctx, e, []string{"rt", "send", "--socket", sock, "--count", "5", "--interval", "1ms",
		"--deadline", "200ms", "--flow", "3", rx.Addr.String()})
	if rc != 0 || !strings.Contains(out.String(), "5 admitted") {
		t.Fatalf("rt send: rc %d\n%s%s", rc, out.String(), errb.String())
	}
	out.Reset()
	if rc := runMain(ctx, e, []string{"rt", "stats", "--socket", sock}); rc != 0 {
		t.Fatalf("rt stats: rc %d: %s", rc, errb.String())
	}
	var row []string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "0" && f[1] == "3" {
			row = f
		}
	}
	if row == nil || row[2] != "5" || row[4] != "5" {
		t.Fatalf("rt stats: no row uid 0 flow 3 with 5 admitted and 5 sent:\n%s", out.String())
	}
	if rc := runMain(ctx, e, []string{"rt", "send", "--socket", sock, "nowhere"}); rc != 2 {
		t.Errorf("bad destination: rc %d", rc)
	}
}

// TestRTSendNoneAdmitted: the socket comes from LANES_RT_SOCKET; a run that
// has none of its datagrams admitted (a deadline shorter than a datagram's
// time on the wire) exits 1 and names the reasons.
func TestRTSendNoneAdmitted(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx := rtlanetest.Start(t)
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string {
		if k == "LANES_RT_SOCKET" {
			return sock
		}
		return ""
	}}
	rc := runMain(context.Background(), e, []string{"rt", "send", "--count", "3", "--interval", "1ms",
		"--deadline", "1ns", rx.Addr.String()})
	if rc != 1 || !strings.Contains(out.String(), "0 admitted") ||
		!strings.Contains(errb.String(), "none of 3 datagrams admitted (refused: own-deadline-unmeetable 3)") {
		t.Fatalf("rt send, 1ns deadline: rc %d, want 1\n%s%s", rc, out.String(), errb.String())
	}
}

// TestRTSendSaysWhatFixesIt: with no realtime socket, `lanes rt send` says
// whether the lane is off or the daemon is not running, naming the fix.
func TestRTSendSaysWhatFixesIt(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "rt.sock")
	run := func() string {
		var out, errb bytes.Buffer
		e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		if rc := runMain(context.Background(), e, []string{"rt", "send", "--socket", sock, "127.0.0.1:9"}); rc != 1 {
			t.Errorf("rt send without a socket: rc %d, want 1", rc)
		}
		return errb.String()
	}
	if msg := run(); !strings.Contains(msg, rt.MsgNoDaemon) {
		t.Errorf("no daemon: %q, want %q", msg, rt.MsgNoDaemon)
	}
	api, err := net.Listen("unix", filepath.Join(dir, "lanes.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if msg := run(); !strings.Contains(msg, rt.MsgLaneOff) {
		t.Errorf("lane off: %q, want %q", msg, rt.MsgLaneOff)
	}
}
