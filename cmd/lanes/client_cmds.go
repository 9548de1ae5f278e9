// client_cmds.go: the CLI commands that talk to a running daemon over its API:
// `lanes status`, `lanes register`, `lanes unregister`, `lanes run` and
// `lanes move`.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/udpflow"
)

func init() {
	register(&command{path: "status", summary: "show lanes' state: network namespace, per-lane counters per interface, registered flows",
		setup: statusCmd})
	register(&command{path: "register", summary: "put a TCP or UDP flow (remote address and port, local port) in a lane", setup: registerCmd})
	register(&command{path: "unregister", summary: "remove a flow registration", setup: unregisterCmd})
	register(&command{path: "run", summary: "run a command in a lane (cgroup + CPU priority for its whole process tree)",
		args: "[flags] [--] CMD [ARGS...]", nargs: anyArgs, stopAtArg: true, setup: runInLaneCmd})
	register(&command{path: "move", summary: "move running processes to a lane at once (like renice or chrt -p): a PID or every process of a cgroup, its open sockets, future children and CPU priority",
		args: "--lane LANE (PID... | --cgroup PATH)", nargs: anyArgs, setup: moveCmd})
}

func socketFlag(fs *pflag.FlagSet, e *env) *string {
	def := e.getenv("LANES_SOCKET")
	if def == "" {
		def = client.DefaultSocket
	}
	return fs.String("socket", def, "daemon API socket (env LANES_SOCKET)")
}

// dialDaemon connects to the daemon and refuses one that manages another
// network namespace than this process's.
func dialDaemon(sock string) (*client.Client, *client.Status, error) {
	c, err := client.Dial(sock)
	if err != nil {
		return nil, nil, err
	}
	st, err := c.Status()
	if err == nil {
		err = client.CheckSameNetns(st)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, st, nil
}

// dialDaemonWait is dialDaemon retried while no daemon listens yet (its
// socket missing or refusing), for up to wait: a daemon just started in
// the background of a shell serves its API about a second later.
func dialDaemonWait(ctx context.Context, sock string, wait time.Duration) (*client.Client, *client.Status, error) {
	deadline := time.Now().Add(wait)
	for {
		c, st, err := dialDaemon(sock)
		if err == nil || !errors.Is(err, client.ErrNoDaemon) || !time.Now().Before(deadline) {
			return c, st, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func statusCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := socketFlag(fs, e)
	asJSON := fs.Bool("json", false, "print JSON")
	verbose := fs.BoolP("verbose", "v", false, "every line whole (default: 100 columns), and the daemon's own UDP sockets")
	wait := fs.Duration("wait", 0, "wait up to this long for a daemon that is starting to answer (e.g. 30s)")
	return func(ctx context.Context, _ []string) error {
		c, st, err := dialDaemonWait(ctx, *sock, *wait)
		if err != nil {
			return err
		}
		udp, more, udpErr := c.UDPFlows()
		udpAt := time.Now()
		rates, ratesErr := sampleLaneRates(c)
		if udpErr == nil {
			udp, more = udpAgain(c, udp, more, udpAt)
		}
		c.Close()
		if ratesErr == nil {
			addUDPRates(rates, udp)
		}
		udpflow.FillOwners(udp, "/proc")
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(statusJSON{Status: st, UDPFlows: udp, UDPMore: more, TCPRates: rates})
		}
		out := *e
		if !*verbose {
			fw := newFitWriter(e.stdout)
			defer fw.Close()
			out.stdout = fw
			udp = slices.DeleteFunc(udp, func(f udpflow.Flow) bool { return f.Daemon })
		}
		printStatus(&out, st)
		if ratesErr == nil {
			printLaneRates(out.stdout, rates)
		}
		if udpErr == nil {
			printUDPFlows(&out, udp, more, *verbose)
		}
		return nil
	}
}

// statusJSON is `lanes status --json`: the daemon's status document, its
// UDP flows (QUIC included) with lane and why, and each lane's TCP rates.
type statusJSON struct {
	*client.Status
	UDPFlows []udpflow.Flow `json:"udp_flows"`
	UDPMore  int            `json:"udp_more,omitempty"`
	TCPRates []laneRate     `json:"tcp_rates,omitempty"` // each lane's TCP and UDP rates now (status_rates.go; the key predates UDP)
}

// printUDPFlows is status's UDP section: every UDP socket of the daemon's
// namespace and the background class's 5-tuples, with lane and why.
func printUDPFlows(e *env, flows []udpflow.Flow, more int, verbose bool) {
	fmt.Fprintf(e.stdout, "\nUDP flows (QUIC included): %d\n", len(flows))
	if more > 0 {
		fmt.Fprintf(e.stdout, "  (and %d more the daemon left out of its reply)\n", more)
	}
	switch {
	case len(flows) == 0:
	case verbose:
		udpflow.WriteTable(e.stdout, flows)
	default:
		udpflow.WriteBrief(e.stdout, flows, outputWidth)
	}
}

func printStatus(e *env, st *client.Status) {
	fmt.Fprintf(e.stdout, "lanes %s  policy %s  since %s\nnetwork namespace %s\n", st.Version, st.Policy, st.StartedAt, st.Netns)
	printPolicyRefused(e, st.PolicyRefused)
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
		switch {
		case it.BackgroundMode == "cwnd clamp":
			fmt.Fprintf(e.stdout, "background uploads held by: %s (clamps set: %d)\n", it.BackgroundCC, it.Sockops["bg_clamp"])
		case it.BackgroundCC != "":
			fmt.Fprintf(e.stdout, "background congestion control: %s (sockets switched: %d)\n", it.BackgroundCC, it.Sockops["bg_cc"])
		}
		if it.Queue != "" {
			fmt.Fprintf(e.stdout, "queue: %s\nforeground protected by: %s\n", it.Queue, it.Protection)
		}
		switch it.InteractiveLeaf {
		case "fq_codel":
			fmt.Fprintln(e.stdout, "interactive lane's queue: fq_codel (a queue per flow, CoDel at 5 ms)")
		case "bfifo":
			fmt.Fprintln(e.stdout, "interactive lane's queue: bfifo (no fq_codel in this kernel: the lane's flows share one FIFO)")
		}
		if it.BackgroundNow != "" {
			fmt.Fprintf(e.stdout, "background now: %s\n", it.BackgroundNow)
		}
		printAccount(e.stdout, it)
		if it.NonTCP != "" {
			fmt.Fprintf(e.stdout, "background QUIC/UDP: %s\n", it.NonTCP)
		}
		if it.Downloads != "" {
			fmt.Fprintf(e.stdout, "background downloads held back by: %s\n", it.Downloads)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(st.Capabilities)) {
		if v := st.Capabilities[c]; v != "on" {
			fmt.Fprintf(e.stdout, "capability %s: %s\n", c, v)
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

// printPolicyRefused says that the policy file on disk was refused at the
// last reload and which policy runs instead.
func printPolicyRefused(e *env, r *client.PolicyRefused) {
	if r == nil {
		return
	}
	errs := "1 error"
	if r.Errors != 1 {
		errs = fmt.Sprintf("%d errors", r.Errors)
	}
	fmt.Fprintf(e.stdout, "POLICY REFUSED at %s (%s): running the policy read at %s\n", r.At, errs, r.Running)
	fmt.Fprintf(e.stdout, "  first: %s\n  fix the file, check it (lanes daemon --check), then reload (kill -HUP)\n", r.First)
}

// flowFlags are the flags naming a flow by the paper's 3-tuple.
type flowFlags struct {
	dst, proto *string
	sport      *uint
}

func addFlowFlags(fs *pflag.FlagSet) flowFlags {
	return flowFlags{
		dst:   fs.String("dst", "", "destination IP:PORT of the flow"),
		sport: fs.Uint("sport", 0, "local (source) port of the flow"),
		proto: fs.String("proto", "tcp", "tcp or udp"),
	}
}

func (ff flowFlags) flow() (client.Flow, error) {
	if *ff.dst == "" {
		return client.Flow{}, usageErrorf("--dst IP:PORT is required")
	}
	ap, err := netip.ParseAddrPort(*ff.dst)
	if err != nil {
		return client.Flow{}, usageErrorf("--dst %q: want IP:PORT ([v6]:PORT for IPv6)", *ff.dst)
	}
	if *ff.sport == 0 || *ff.sport > 65535 {
		return client.Flow{}, usageErrorf("--sport must be 1-65535")
	}
	f := client.Flow{Dst: ap.Addr().Unmap().String(), DPort: ap.Port(), SPort: uint16(*ff.sport), Proto: *ff.proto}
	if err := f.Validate(); err != nil {
		return f, usageErrorf("%v", err)
	}
	return f, nil
}

func registerCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := socketFlag(fs, e)
	ln := fs.String("lane", "background", "lane: "+strings.Join(lane.Names(), ", "))
	ff := addFlowFlags(fs)
	return func(context.Context, []string) error {
		l, err := lane.Parse(*ln)
		if err != nil {
			return usageErrorf("%v", err)
		}
		f, err := ff.flow()
		if err != nil {
			return err
		}
		c, _, err := dialDaemon(*sock)
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
}

func unregisterCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := socketFlag(fs, e)
	ff := addFlowFlags(fs)
	return func(context.Context, []string) error {
		f, err := ff.flow()
		if err != nil {
			return err
		}
		c, _, err := dialDaemon(*sock)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Unregister(f)
	}
}

// runInLaneCmd moves this process into the lane's cgroup (through the daemon,
// which checks the caller may), lowers its CPU priority as the paper does
// (nice 19 = static priority 139; --sched-idle for SCHED_IDLE), then execs the
// command so that the whole process tree it starts inherits both.
func runInLaneCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := socketFlag(fs, e)
	ln := fs.String("lane", "background", "lane: "+strings.Join(lane.Names(), ", "))
	nice := fs.Int("nice", 0, "nice value for the command, -20..19 (if not given: 19 in background, unchanged otherwise)")
	idle := fs.Bool("sched-idle", false, "run under SCHED_IDLE (below nice 19)")
	return func(_ context.Context, cmdArgs []string) error {
		if len(cmdArgs) == 0 {
			return usageErrorf("no command given")
		}
		l, err := lane.Parse(*ln)
		if err != nil {
			return usageErrorf("%v", err)
		}
		n, setNice := *nice, fs.Changed("nice")
		if setNice && (n < -20 || n > 19) {
			return usageErrorf("--nice %d: want -20..19", n)
		}
		if !setNice && l == lane.Background {
			n, setNice = 19, true
		}
		path, err := exec.LookPath(cmdArgs[0])
		if err != nil {
			return err
		}
		c, _, err := dialDaemon(*sock)
		if err != nil {
			return err
		}
		_, err = c.Move(os.Getpid(), l, true)
		c.Close()
		if err != nil {
			return err
		}
		// nice and scheduling policy are per thread on Linux: keep this goroutine
		// on one thread from here to exec, which keeps only the calling thread.
		runtime.LockOSThread()
		if setNice {
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
}

// moveCmd moves running processes into a lane through the daemon's
// move-pid operation (which checks the caller may move each one): their
// cgroup (future children follow), the sockets they hold open (at once),
// and, unless --keep-sched, the lane's CPU treatment (background: nice 19;
// moving out gives back what they had). It says what moved.
func moveCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := socketFlag(fs, e)
	ln := fs.String("lane", "", "lane: "+strings.Join(lane.Names(), ", ")+" (required)")
	cg := fs.String("cgroup", "", "move every process of this cgroup v2 directory that lives in this network namespace (a path, or relative to /sys/fs/cgroup)")
	keep := fs.Bool("keep-sched", false, "leave the processes' CPU scheduling (nice, class) as it is")
	return func(_ context.Context, args []string) error {
		if *ln == "" {
			return usageErrorf("--lane is required")
		}
		l, err := lane.Parse(*ln)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if (*cg == "") == (len(args) == 0) {
			return usageErrorf("give PIDs or --cgroup PATH (one of the two)")
		}
		var pids []int
		for _, a := range args {
			pid, err := strconv.Atoi(a)
			if err != nil || pid <= 0 {
				return usageErrorf("bad PID %q", a)
			}
			pids = append(pids, pid)
		}
		if *cg != "" {
			if pids, err = cgroupPIDs(*cg); err != nil {
				return err
			}
		}
		c, _, err := dialDaemon(*sock)
		if err != nil {
			return err
		}
		defer c.Close()
		var sum client.Moved
		scheds := map[string]int{}
		for _, pid := range pids {
			m, err := c.Move(pid, l, *keep)
			if err != nil && sum.Processes > 0 {
				return fmt.Errorf("pid %d: %w (%d moved before it)", pid, err, sum.Processes)
			}
			if err != nil {
				return fmt.Errorf("pid %d: %w", pid, err)
			}
			sum.Processes++
			sum.TCP += m.TCP
			sum.UDP += m.UDP
			scheds[cmp.Or(m.Sched, "kept")]++
		}
		fmt.Fprintf(e.stdout, "%d process(es) -> %s: open sockets %d tcp, %d udp; cpu %s\n",
			sum.Processes, l, sum.TCP, sum.UDP, schedSummary(scheds))
		return nil
	}
}

// schedSummary says what happened to the processes' CPU scheduling:
// "nice 19", or "nice 19 (2), restored (1)" when they differ.
func schedSummary(m map[string]int) string {
	if len(m) == 1 {
		for k := range m {
			return k
		}
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s (%d)", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// cgroupPIDs lists the processes of a cgroup v2 directory.
func cgroupPIDs(dir string) ([]int, error) {
	if !filepath.IsAbs(dir) {
		root := "/sys/fs/cgroup"
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
			root = "/sys/fs/cgroup/unified" // a hybrid system's cgroup v2
		}
		dir = filepath.Join(root, dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	elsewhere := 0
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if !sameNetns(pid) {
			elsewhere++ // the daemon of its namespace moves it
			continue
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("cgroup %s has no processes in this network namespace (%d in others)", dir, elsewhere)
	}
	return pids, nil
}

// sameNetns: pid lives in the caller's network namespace (a process gone
// meanwhile counts as here: its move says it is gone).
func sameNetns(pid int) bool {
	var me, it syscall.Stat_t
	if syscall.Stat("/proc/thread-self/ns/net", &me) != nil || syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &it) != nil {
		return true
	}
	return me.Ino == it.Ino && me.Dev == it.Dev
}
