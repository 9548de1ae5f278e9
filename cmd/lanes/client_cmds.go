// client_cmds.go: the CLI commands that talk to a running daemon over its API:
// `lanes status`, `lanes register`, `lanes unregister` and `lanes run`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

func init() {
	register(&command{name: "status", summary: "show lanes' state: per-lane counters per interface, registered flows",
		usage: "[--socket PATH] [--json]", run: runStatus})
	register(&command{name: "register", summary: "put a flow (the paper's 3-tuple) in a lane",
		usage: "--lane LANE --dst IP:PORT --sport N [--proto tcp|udp] [--socket PATH]", run: runRegister})
	register(&command{name: "unregister", summary: "remove a flow registration",
		usage: "--dst IP:PORT --sport N [--proto tcp|udp] [--socket PATH]", run: runUnregister})
	register(&command{name: "run", summary: "run a command in a lane (cgroup + CPU priority for its whole process tree)",
		usage: "--lane LANE [--nice N] [--sched-idle] [--socket PATH] -- CMD [ARGS...]", run: runInLane})
}

func newFlags(name string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("lanes "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// parseFlags turns flag errors into usage errors and refuses stray arguments.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageErrorf("%v", err)
	}
	if !allowArgs && fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func socketFlag(fs *flag.FlagSet, e *env) *string {
	def := e.getenv("LANES_SOCKET")
	if def == "" {
		def = api.DefaultSocket
	}
	return fs.String("socket", def, "daemon API socket (env LANES_SOCKET)")
}

func runStatus(_ context.Context, e *env, args []string) error {
	fs := newFlags("status", e)
	sock := socketFlag(fs, e)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	c, err := api.Dial(*sock)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(e, st)
	return nil
}

func printStatus(e *env, st *api.Status) {
	fmt.Fprintf(e.stdout, "lanes %s  policy %s  since %s\n", st.Version, st.Policy, st.StartedAt)
	for _, it := range st.Interfaces {
		rate := ""
		if it.UplinkBps > 0 {
			rate = fmt.Sprintf(" uplink %.3g Mbit/s", float64(it.UplinkBps)/1e6)
		}
		fmt.Fprintf(e.stdout, "\n%s: %s%s\n", it.Name, it.Mode, rate)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "lane\tpackets\tbytes\tdrops\toverlimits\tbacklog\t")
		for _, l := range it.Lanes {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%dB/%dp\t\n", l.Lane, l.Packets, l.Bytes, l.Drops, l.Overlimits, l.BacklogBytes, l.BacklogPackets)
		}
		tw.Flush()
		if len(it.Classifier) > 0 {
			keys := make([]string, 0, len(it.Classifier))
			for k := range it.Classifier {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s %d", k, it.Classifier[k]))
			}
			fmt.Fprintf(e.stdout, "classified by: %s\n", strings.Join(parts, ", "))
		}
		if it.CwndCapCC != "" {
			fmt.Fprintf(e.stdout, "cwnd caps enforced by: %s (sockets switched from cubic: %d)\n", it.CwndCapCC, it.Sockops["cc_switch"])
		}
	}
	if len(st.Components) > 0 {
		fmt.Fprintln(e.stdout)
		keys := make([]string, 0, len(st.Components))
		for k := range st.Components {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(e.stdout, "%s: %s\n", k, st.Components[k])
		}
	}
	fmt.Fprintf(e.stdout, "\nregistered flows: %d\n", len(st.Flows))
	for _, f := range st.Flows {
		fmt.Fprintf(e.stdout, "  %-12s %s  (%s, uid %d)\n", f.Lane, f.Flow, f.Source, f.UID)
	}
}

// flowFlags are the flags naming a flow by the paper's 3-tuple.
type flowFlags struct {
	dst, proto *string
	sport      *uint
}

func addFlowFlags(fs *flag.FlagSet) flowFlags {
	return flowFlags{
		dst:   fs.String("dst", "", "destination IP:PORT of the flow"),
		sport: fs.Uint("sport", 0, "local (source) port of the flow"),
		proto: fs.String("proto", "tcp", "tcp or udp"),
	}
}

func (ff flowFlags) flow() (api.Flow, error) {
	if *ff.dst == "" {
		return api.Flow{}, usageErrorf("--dst IP:PORT is required")
	}
	ap, err := netip.ParseAddrPort(*ff.dst)
	if err != nil {
		return api.Flow{}, usageErrorf("--dst %q: want IP:PORT ([v6]:PORT for IPv6)", *ff.dst)
	}
	if *ff.sport == 0 || *ff.sport > 65535 {
		return api.Flow{}, usageErrorf("--sport must be 1-65535")
	}
	f := api.Flow{Dst: ap.Addr().Unmap().String(), DPort: ap.Port(), SPort: uint16(*ff.sport), Proto: *ff.proto}
	if err := f.Validate(); err != nil {
		return f, usageErrorf("%v", err)
	}
	return f, nil
}

func runRegister(_ context.Context, e *env, args []string) error {
	fs := newFlags("register", e)
	sock := socketFlag(fs, e)
	ln := fs.String("lane", "background", "lane: realtime, interactive or background")
	ff := addFlowFlags(fs)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	l, err := lane.Parse(*ln)
	if err != nil {
		return usageErrorf("%v", err)
	}
	f, err := ff.flow()
	if err != nil {
		return err
	}
	c, err := api.Dial(*sock)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Register(f, l); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s -> %s\n", f, l)
	return nil
}

func runUnregister(_ context.Context, e *env, args []string) error {
	fs := newFlags("unregister", e)
	sock := socketFlag(fs, e)
	ff := addFlowFlags(fs)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	f, err := ff.flow()
	if err != nil {
		return err
	}
	c, err := api.Dial(*sock)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Unregister(f)
}

// runInLane moves this process into the lane's cgroup (through the daemon,
// which checks the caller may), lowers its CPU priority as the paper does
// (nice 19 = static priority 139; --sched-idle for SCHED_IDLE), then execs the
// command so that the whole process tree it starts inherits both.
func runInLane(_ context.Context, e *env, args []string) error {
	fs := newFlags("run", e)
	sock := socketFlag(fs, e)
	ln := fs.String("lane", "background", "lane: realtime, interactive or background")
	nice := fs.Int("nice", -100, "nice value for the command (default: 19 in background, unchanged otherwise)")
	idle := fs.Bool("sched-idle", false, "run under SCHED_IDLE (below nice 19)")
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		return usageErrorf("no command given")
	}
	l, err := lane.Parse(*ln)
	if err != nil {
		return usageErrorf("%v", err)
	}
	path, err := exec.LookPath(cmdArgs[0])
	if err != nil {
		return err
	}
	c, err := api.Dial(*sock)
	if err != nil {
		return err
	}
	err = c.MovePID(os.Getpid(), l)
	c.Close()
	if err != nil {
		return err
	}
	// nice and scheduling policy are per thread on Linux: keep this goroutine
	// on one thread from here to exec, which keeps only the calling thread.
	runtime.LockOSThread()
	n := *nice
	if n == -100 && l == lane.Background {
		n = 19
	}
	if n != -100 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, n); err != nil {
			return fmt.Errorf("setpriority %d: %w", n, err)
		}
	}
	if *idle {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 5 /* SCHED_IDLE */}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return fmt.Errorf("SCHED_IDLE: %w", err)
		}
	}
	return syscall.Exec(path, cmdArgs, os.Environ())
}
