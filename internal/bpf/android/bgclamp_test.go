// bgclamp_test.go: the Android-form background clamp (objects/bgclamp.c),
// loaded as NetBpfLoad loads it, runs in the kernel: attached to a test
// cgroup, it follows a background upload's RTT samples and sets its cwnd
// clamp; a socket it was not told about is left alone.
package android

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// bgcState reads struct bgc_state's fields the test checks (u32 offsets:
// struct ledbat's samples at 15, then cwnd at 24, applied at 31).
type bgcState struct{ samples, cwnd, applied uint32 }

func readBgcState(t *testing.T, m *ebpf.Map, cookie uint64) (bgcState, bool) {
	t.Helper()
	var raw []byte
	if err := m.Lookup(cookie, &raw); err != nil {
		return bgcState{}, false
	}
	u := func(i int) uint32 { return binary.LittleEndian.Uint32(raw[4*i:]) }
	return bgcState{samples: u(15), cwnd: u(24), applied: u(31)}, true
}

func TestAndroidFormBgClampRuns(t *testing.T) {
	testutil.RequireRoot(t)
	o, err := Load("objects/bgclamp.o", Locations[0])
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	prog := o.Programs["sockops/lanes_bgclamp"]
	if prog == nil {
		t.Fatalf("no program lanes_bgclamp among %v", o.Programs)
	}
	cg := testCgroup(t)
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupSockOps, Program: prog})
	if err != nil {
		t.Fatalf("attach to %s: %v", cg, err)
	}
	defer l.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // the receiver, outside the cgroup
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	for _, background := range []bool{true, false} {
		st, found := upload(t, o, cg, ln.Addr().String(), background)
		t.Logf("background %v: state %+v (found %v)", background, st, found)
		switch {
		case background && (!found || st.samples == 0 || st.applied == 0):
			t.Errorf("background upload: state %+v (found %v); want RTT samples taken and a clamp set", st, found)
		case !background && found:
			t.Errorf("a socket not named in bg_target got state %+v", st)
		}
	}
}

// upload runs a 1-s upload from a child in cg and returns the program's
// state for its socket before it closes; background: its cookie goes into
// bg_target (target 10 ms) before it sends.
func upload(t *testing.T, o *Objects, cg, addr string, background bool) (st bgcState, found bool) {
	t.Helper()
	uploadFrom(t, cg, addr, func(cookie uint64, _ int) {
		if background {
			if err := o.Maps["bg_target"].Put(cookie, uint32(10000)); err != nil {
				t.Fatal(err)
			}
		}
	}, func(cookie uint64) { st, found = readBgcState(t, o.Maps["bgc_state"], cookie) })
	return st, found
}

// uploadFrom runs a 1-s upload to addr from a child in cg: connected calls
// before with its socket's cookie and TCP_NOTSENT_LOWAT, after once it has
// sent (the socket still open).
func uploadFrom(t *testing.T, cg, addr string, before func(cookie uint64, lowat int), after func(cookie uint64)) {
	t.Helper()
	dir, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUploadHelper$")
	cmd.Env = append(os.Environ(), "LANES_ANDROID_UPLOAD="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	r := bufio.NewReader(stdout)
	var cookie uint64
	var lowat int
	if line, err := r.ReadString('\n'); err != nil || func() error { _, err := fmt.Sscanf(line, "cookie %d lowat %d", &cookie, &lowat); return err }() != nil {
		t.Fatalf("upload helper: %q %v", line, err)
	}
	before(cookie, lowat)
	fmt.Fprintln(stdin, "send")
	if line, err := r.ReadString('\n'); err != nil || line != "sent\n" {
		t.Fatalf("upload helper: %q %v", line, err)
	}
	after(cookie)
}

// TestUploadHelper is uploadFrom's child: it connects, prints its
// socket's cookie and TCP_NOTSENT_LOWAT, sends for a second when told,
// says so and waits to be closed.
func TestUploadHelper(t *testing.T) {
	addr := os.Getenv("LANES_ANDROID_UPLOAD")
	if addr == "" {
		t.Skip("the child of TestAndroidFormBgClampRuns")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.(*net.TCPConn).SyscallConn()
	var cookie uint64
	var lowat int
	raw.Control(func(fd uintptr) {
		cookie, _ = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		lowat, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	})
	fmt.Printf("cookie %d lowat %d\n", cookie, lowat)
	in := bufio.NewReader(os.Stdin)
	in.ReadString('\n')
	buf := make([]byte, 64<<10)
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("sent")
	in.ReadString('\n')
}
