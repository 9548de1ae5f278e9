// plot_test.go: `lanes plot` draws a monitor file and names the bad line
// of a malformed or truncated one; `lanes monitor` writes a file it can read.
package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func runLanes(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := runMain(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// monitorFile records a real loopback connection with `lanes monitor`.
func monitorFile(t *testing.T, name string, extra ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			buf := make([]byte, 1<<16)
			for {
				if _, err := c.Read(buf); err != nil {
					c.Close()
					return
				}
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.Write(buf)
			time.Sleep(time.Millisecond)
		}
	}()
	path := filepath.Join(t.TempDir(), name)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	args := append([]string{"monitor", "--port", port, "--interval", "20ms", "--count", "10", "--output", path}, extra...)
	if _, stderr, code := runLanes(t, args...); code != 0 {
		t.Fatalf("lanes monitor: exit %d: %s", code, stderr)
	}
	return path
}

func TestMonitorThenPlot(t *testing.T) {
	for _, name := range []string{"run.json", "run.csv"} {
		flag := "--json"
		if strings.HasSuffix(name, ".csv") {
			flag = "--csv"
		}
		path := monitorFile(t, name, flag)
		b, _ := os.ReadFile(path)
		if n := bytes.Count(b, []byte("\n")); n < 10 {
			t.Fatalf("%s: %d lines, want at least 10 (2 sockets x 10 samples)", name, n)
		}
		stdout, stderr, code := runLanes(t, "plot", "--title", "test", path)
		if code != 0 {
			t.Fatalf("lanes plot %s: exit %d: %s", name, code, stderr)
		}
		prefix := strings.TrimSuffix(strings.TrimSuffix(path, ".json"), ".csv")
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(prefix + ext); err != nil || st.Size() < 1000 {
				t.Errorf("%s: no plot %s (%v): %s", name, prefix+ext, err, stdout)
			}
		}
	}
}

func TestPlotBadInput(t *testing.T) {
	path := monitorFile(t, "good.json", "--json")
	good, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(good), "\n")
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"truncated.json", string(good[:len(good)-30]), "line " + strconv.Itoa(len(lines)-1)},
		{"garbage.json", lines[0] + "{\"time\": oops}\n" + lines[1], "line 2"},
		{"short.csv", "time,cwnd\n2026-01-02T03:04:05Z,10\n2026-01-02T03:04:05Z\n", "line 3"},
		{"notmonitor.csv", "a,b,c\n1,2,3\n", "line 1"},
		{"empty.json", "", "empty"},
	} {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, []byte(tc.content), 0o644)
		_, stderr, code := runLanes(t, "plot", p)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want an error naming %q", tc.name, code, stderr, tc.want)
		}
	}
	if _, _, code := runLanes(t, "plot"); code != 2 {
		t.Errorf("plot without a file: exit %d, want 2", code)
	}
}

func TestMonitorFlags(t *testing.T) {
	for _, args := range [][]string{
		{"monitor", "--interval", "1ms"},
		{"monitor", "--json", "--prometheus"},
		{"monitor", "--csv", "--events"},
		{"monitor", "--lane", "nosuchlane"},
		{"monitor", "--src", "not-an-address"},
		{"monitor", "extra-arg"},
	} {
		if _, _, code := runLanes(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
	if _, stderr, code := runLanes(t, "monitor", "--netns", "/nonexistent", "--count", "1"); code != 1 || !strings.Contains(stderr, "/nonexistent") {
		t.Errorf("bad --netns: exit %d, %q", code, stderr)
	}
	out, stderr, code := runLanes(t, "monitor", "--prometheus", "--interval", "10ms")
	if code != 0 || !strings.Contains(out, `lanes_tcp_flows{lane="interactive"}`) {
		t.Errorf("--prometheus: exit %d %s\n%s", code, stderr, out)
	}
}
