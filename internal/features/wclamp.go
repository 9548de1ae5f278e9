// wclamp.go probes whether sock_ops may set TCP_WINDOW_CLAMP with
// bpf_setsockopt, which rLEDBAT needs (internal/bpf/sockops/rledbat.h): the
// kernel allows it from 5.11 ("bpf: Adds support for setting window
// clamp"); before, bpf_setsockopt returns -EINVAL. The
// probe asks the kernel itself: a tiny sock_ops program attached at the
// cgroup v2 root calls bpf_setsockopt(SOL_TCP, TCP_WINDOW_CLAMP) on one
// loopback connection made in a scratch network namespace and records what
// it returned.
package features

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// WindowClampFeature is the probe's name in the report.
const WindowClampFeature = "bpf/sock_ops setsockopt TCP_WINDOW_CLAMP"

// bpf_sock_ops field offsets (include/uapi/linux/bpf.h, stable ABI).
const (
	sockOpsOp        = 0
	sockOpsLocalPort = 68 // host byte order
	activeEstablCB   = 4  // BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB
	solTCP           = 6
	tcpWindowClamp   = 10
	notRun           = 1 // the result slot's value before the program runs
)

// ErrWindowClampRefused: this kernel's bpf_setsockopt refuses TCP_WINDOW_CLAMP.
var ErrWindowClampRefused = errors.New("bpf_setsockopt refuses TCP_WINDOW_CLAMP (allowed from Linux 5.11)")

// ProbeWindowClamp returns nil when sock_ops may set TCP_WINDOW_CLAMP,
// ErrWindowClampRefused (wrapped, with the errno) when the kernel refuses
// it, or another error when the probe could not run (no cgroup v2, not
// root).
func ProbeWindowClamp() error { return probeSockopt(tcpWindowClamp) }

// probeSockopt runs the probe for one SOL_TCP option.
func probeSockopt(optname int32) error {
	return WithCgroup2(func(cg string) error { return probeSockoptAt(cg, optname) })
}

// probeSockoptAt runs the probe with the cgroup v2 root at cg.
func probeSockoptAt(cg string, optname int32) error {
	res, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("not probed: %w", err)
	}
	defer res.Close()
	if err := res.Put(uint32(0), int64(notRun)); err != nil {
		return fmt.Errorf("not probed: %w", err)
	}
	port := 40000 + rand.IntN(20000) // the client's port: the program acts on this connection only
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SockOps, License: "GPL", Instructions: sockoptProgram(res, port, optname)})
	if err != nil {
		return fmt.Errorf("not probed: load sock_ops program: %w", err)
	}
	defer prog.Close()
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupSockOps, Program: prog})
	if err != nil {
		return fmt.Errorf("not probed: attach sock_ops at %s: %w", cg, err)
	}
	defer l.Close()
	if err := inScratchNetns(func() error { return loopbackConnect(port) }); err != nil {
		return fmt.Errorf("not probed: %w", err)
	}
	var ret int64
	if err := res.Lookup(uint32(0), &ret); err != nil {
		return fmt.Errorf("not probed: %w", err)
	}
	switch {
	case ret == notRun:
		return errors.New("not probed: the sock_ops program did not see the connection")
	case ret < 0 && optname == tcpWindowClamp:
		return fmt.Errorf("%w: %w", ErrWindowClampRefused, syscall.Errno(-ret))
	case ret < 0:
		return fmt.Errorf("bpf_setsockopt(SOL_TCP, %d): %w", optname, syscall.Errno(-ret))
	}
	return nil
}

// sockoptProgram: on ACTIVE_ESTABLISHED of the socket whose local port is
// port, bpf_setsockopt(SOL_TCP, optname, 256 KiB) and store its return
// value in res[0].
func sockoptProgram(res *ebpf.Map, port int, optname int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, sockOpsOp, asm.Word),
		asm.JNE.Imm(asm.R2, activeEstablCB, "out"),
		asm.LoadMem(asm.R2, asm.R6, sockOpsLocalPort, asm.Word),
		asm.JNE.Imm(asm.R2, int32(port), "out"),
		asm.StoreImm(asm.RFP, -4, 256<<10, asm.Word),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, solTCP),
		asm.Mov.Imm(asm.R3, optname),
		asm.Mov.Reg(asm.R4, asm.RFP),
		asm.Add.Imm(asm.R4, -4),
		asm.Mov.Imm(asm.R5, 4),
		asm.FnSetsockopt.Call(),
		asm.StoreMem(asm.RFP, -16, asm.R0, asm.DWord),
		asm.StoreImm(asm.RFP, -8, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, res.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -16),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"),
		asm.Return(),
	}
}

// loopbackConnect connects 127.0.0.1:port to a listener on loopback (in
// the calling thread's namespace) and closes both.
func loopbackConnect(port int) error {
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer ln.Close()
	d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
			return serr
		}}
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		return err
	}
	// ACTIVE_ESTABLISHED ran in connect's own context, before Dial
	// returned. Reset both ends: nothing lingers in TIME_WAIT.
	defer func() { c.(*net.TCPConn).SetLinger(0); c.Close() }()
	a, err := ln.Accept()
	if err != nil {
		return err
	}
	a.(*net.TCPConn).SetLinger(0)
	return a.Close()
}
