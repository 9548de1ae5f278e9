// Package topo builds a lab run's hosts: network namespaces with unique
// names, their TUN addressing, the host-side gate qdisc, and the processes
// the run starts inside them; Close removes all of it.
//
// Names: every namespace is "lanes-lab-<pid>-<run>-<host>", so two labs can
// run at once and `lanes lab clean` can tell a dead run's leftovers (the pid
// no longer exists) from a live one's.
package topo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/lanes-net/lanes/internal/nsrun"
)

// NSPrefix starts every namespace name the lab creates.
const NSPrefix = "lanes-lab-"

var runCounter atomic.Uint32

// Topology owns a run's namespaces and processes.
type Topology struct {
	ID    string
	mu    sync.Mutex
	nodes []*Node
	procs []*Proc
	// Exe is the binary started for helpers (default: this executable).
	Exe string
}

// Node is one host: a network namespace.
type Node struct {
	Name   string
	NS     string // namespace name
	Handle netns.NsHandle
	Addr   netip.Addr
	// CC is the congestion control the node's helpers set on their sockets
	// (TCP_CONGESTION; root may pick any available one, while the
	// namespace default is limited to tcp_allowed_congestion_control).
	CC   string
	topo *Topology
}

// New starts a topology with a unique run id.
func New() (*Topology, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	id := fmt.Sprintf("%d-%d", os.Getpid(), runCounter.Add(1))
	return &Topology{ID: id, Exe: exe}, nil
}

// HostAddr is the address plan: host i gets 10.77.<i/250>.<i%250+1>.
func HostAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 77, byte(i / 250), byte(i%250 + 1)})
}

// AddNode creates a namespace with loopback up. cc, if not empty, sets the
// namespace's default TCP congestion control.
func (t *Topology) AddNode(name, cc string) (*Node, error) {
	t.mu.Lock()
	idx := len(t.nodes)
	t.mu.Unlock()
	nsName := NSPrefix + t.ID + "-" + name
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get netns: %w", err)
	}
	defer orig.Close()
	h, err := nsrun.NewNamed(nsName)
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", nsName, err)
	}
	n := &Node{Name: name, NS: nsName, Handle: h, Addr: HostAddr(idx), CC: cc, topo: t}
	t.mu.Lock()
	t.nodes = append(t.nodes, n)
	t.mu.Unlock()
	// Still inside the new namespace: loopback and sysctls.
	setupErr := func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// Each connection starts from nothing of the ones before it: the
		// kernel's per-destination metrics (an ssthresh a closed
		// connection saved) would carry one step's state into the next
		// and make a step's figures depend on the steps before it.
		if err := os.WriteFile("/proc/sys/net/ipv4/tcp_no_metrics_save", []byte("1"), 0); err != nil {
			return err
		}
		if cc != "" {
			// Best effort: a namespace may default only to a CC in the
			// machine's tcp_allowed_congestion_control (on some machines
			// "reno bbr"), so sockets the lab opens itself must also set
			// TCP_CONGESTION (helpers do it from LANES_LAB_CC).
			_ = os.WriteFile("/proc/sys/net/ipv4/tcp_congestion_control", []byte(cc), 0)
		}
		return nil
	}()
	if err := netns.Set(orig); err != nil {
		return nil, fmt.Errorf("return to original netns: %w", err)
	}
	if setupErr != nil {
		return nil, fmt.Errorf("set up %s: %w", nsName, setupErr)
	}
	return n, nil
}

// Nodes lists the nodes in creation order.
func (t *Topology) Nodes() []*Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Node(nil), t.nodes...)
}

// Do runs fn on a thread inside the node's namespace.
func (n *Node) Do(fn func() error) error { return nsrun.Do(n.Handle, fn) }

// ConfigureTUN gives the (already created) TUN device the node's address,
// sets its txqueuelen, brings it up and routes everything through it.
func (n *Node) ConfigureTUN(dev string, txqlen int) error {
	return n.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("%s: find %s: %w", n.Name, dev, err)
		}
		if txqlen > 0 {
			if err := netlink.LinkSetTxQLen(l, txqlen); err != nil {
				return fmt.Errorf("%s: txqueuelen: %w", n.Name, err)
			}
		}
		pfx := netip.PrefixFrom(n.Addr, 32)
		a, _ := netlink.ParseAddr(pfx.String())
		if err := netlink.AddrAdd(l, a); err != nil {
			return fmt.Errorf("%s: address: %w", n.Name, err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("%s: up: %w", n.Name, err)
		}
		src := n.Addr.AsSlice()
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, Src: src}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("%s: default route: %w", n.Name, err)
		}
		return nil
	})
}

// Run runs a command inside the node's namespace and returns its output.
func (n *Node) Run(name string, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.NS, name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), n.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Proc is a process the topology started in a node.
type Proc struct {
	Node  *Node
	Cmd   *exec.Cmd
	Lines chan string // stdout, line by line (closed at EOF)
	done  chan struct{}
	err   error
	mu    sync.Mutex
}

// Start starts `EXE lab helper ARGS...` inside the node (ip netns exec),
// with LANES_LAB_HELPER=1 so test binaries dispatch to the helper too.
func (n *Node) Start(args ...string) (*Proc, error) {
	return n.StartCommand(n.topo.Exe, append([]string{"lab", "helper"}, args...)...)
}

// StartCommand starts any program inside the node.
func (n *Node) StartCommand(name string, args ...string) (*Proc, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.NS, name}, args...)...)
	cmd.Env = append(os.Environ(), "LANES_LAB_HELPER=1", "LANES_LAB_CC="+n.CC)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := startFromSpawner(cmd); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, n.Name, err)
	}
	p := &Proc{Node: n, Cmd: cmd, Lines: make(chan string, 1024), done: make(chan struct{})}
	n.topo.mu.Lock()
	n.topo.procs = append(n.topo.procs, p)
	n.topo.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case p.Lines <- sc.Text():
			default: // nobody reads: drop
			}
		}
		close(p.Lines)
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id (ip netns exec execs the program in place).
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit error (valid after Done).
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Line waits for the next stdout line.
func (p *Proc) Line(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-p.Lines:
		if !ok {
			<-p.done
			return "", fmt.Errorf("process exited: %v", p.Err())
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("no output within %v", timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stopGrace is how long Stop waits after SIGTERM: a lanes daemon removes
// its datapath on SIGTERM, which takes longer than 2 s on a loaded machine;
// killed earlier, it leaves its state behind.
const stopGrace = 10 * time.Second

// Stop ends the process (SIGTERM, then SIGKILL after stopGrace) by its group.
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
}

// Kill ends the process at once (SIGKILL to its group) and waits for it:
// for a load generator whose end is part of a schedule (a helper that ignores
// SIGTERM would otherwise run on for stopGrace).
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// Close stops every process and deletes every namespace of the run.
func (t *Topology) Close() error {
	t.mu.Lock()
	procs, nodes := t.procs, t.nodes
	t.procs, t.nodes = nil, nil
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func(p *Proc) { defer wg.Done(); p.Stop() }(p)
	}
	wg.Wait()
	var errs []error
	for _, n := range nodes {
		_ = nsrun.DestroyTCP(n.NS) // orphans would outlive the namespace
		n.Handle.Close()
		if err := netns.DeleteNamed(n.NS); err != nil {
			errs = append(errs, fmt.Errorf("delete netns %s: %w", n.NS, err))
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists lab namespaces whose creating process no longer exists.
func Leftovers() ([]string, error) {
	ents, err := os.ReadDir("/var/run/netns")
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, NSPrefix) {
			continue
		}
		rest := strings.TrimPrefix(name, NSPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			continue // still running
		}
		out = append(out, name)
	}
	return out, nil
}

// Clean deletes the namespaces Leftovers finds.
func Clean() ([]string, error) {
	names, err := Leftovers()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, n := range names {
		if err := netns.DeleteNamed(n); err != nil {
			errs = append(errs, err)
		}
	}
	return names, errors.Join(errs...)
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n <= 0 {
		return len(b), nil
	}
	k := len(b)
	if k > l.n {
		k = l.n
	}
	l.n -= k
	_, _ = l.w.Write(b[:k])
	return len(b), nil
}

// spawner is one OS thread, locked for the life of the process, that forks
// every command the topology starts. Pdeathsig fires when the forking
// *thread* exits, not the process: a command forked on an ordinary thread
// was SIGKILLed as soon as a goroutine that locks its thread for good (the
// emulator's real-time loops) ended on that thread, so a lanes daemon died
// without its clean stop and left its state behind.
var spawner = sync.OnceValue(func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the process
		for f := range ch {
			f()
		}
	}()
	return ch
})

func startFromSpawner(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawner() <- func() { done <- cmd.Start() }
	return <-done
}
