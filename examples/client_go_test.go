// client_go_test.go: examples/client-go, a module of its own that uses the
// public Go client, built as its users build it (its go.mod, a replace to
// this repository) and run against a real daemon managing a namespace.
package examples_test

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

// buildClientGo builds examples/client-go in its own module.
func buildClientGo(t *testing.T) string {
	bin := filepath.Join(publicDir(t), "lanes-client-go")
	goTool, err := filepath.Abs("../scripts/go")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir = "client-go"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in examples/client-go (its own module): %v\n%s", err, out)
	}
	return bin
}

// listenTCP accepts and drains TCP connections on ns's port until the test
// ends.
func listenTCP(t *testing.T, ns *testutil.NetNS, port int) {
	var ln net.Listener
	ns.Do(t, func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); return })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
}

func TestClientGoModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lanes and runs a daemon")
	}
	testutil.RequireRoot(t)
	app := buildClientGo(t)
	p := testutil.NewVethPair(t)
	sock := testutil.StartLanesDaemon(t, p.A, testutil.BuildLanes(t, ".."), p.LinkA)
	listenTCP(t, p.B, 9100)
	out, err := p.A.Command(app, "--socket", sock, "--to", fmt.Sprintf("%s:9100", p.AddrB)).CombinedOutput()
	t.Logf("lanes-client-go:\n%s", out)
	if err != nil {
		t.Fatalf("lanes-client-go: %v", err)
	}
	for _, want := range []string{
		"registered tcp " + p.AddrB.String() + " dport 9100",
		"event: registered tcp " + p.AddrB.String() + " dport 9100",
		"in background by api",
		"udp " + p.AddrA.String(),
		"unregistered tcp",
		"event: unregistered tcp " + p.AddrB.String() + " dport 9100",
		"run in background: cat /proc/self/cgroup",
		"/background\n", // the command's cgroup: 0::/lanes.INSTANCE/background
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("lanes-client-go's output lacks %q", want)
		}
	}
}
