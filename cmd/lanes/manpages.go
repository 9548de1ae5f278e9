// manpages.go: the hand-written parts of the man pages that the command
// tree cannot say: EXAMPLES and FILES of every command, the daemon's
// systemd unit, and further SEE ALSO references. gendocs.go joins them with
// the generated parts; its test fails for a command without examples.
package main

import "strings"

// manExample is one command line of EXAMPLES and what it does.
type manExample struct{ cmd, what string }

// manExtra holds one page's hand-written sections.
type manExtra struct {
	examples []manExample
	exit     string   // EXIT STATUS, where it is not the usual 0, 1, 2
	files    []string // keys of manFiles
	see      []string // further SEE ALSO entries, e.g. "tc(8)"
	// sections: extra sections (title, roff body) after DESCRIPTION.
	sections [][2]string
}

// manFiles: every path a page may list under FILES (the package's layout;
// make install puts the programs and shared files under /usr/local).
var manFiles = map[string][2]string{
	"policy":   {"/etc/lanes/policy.yaml", "the daemon's policy, lanes-policy(5); the package installs the default one as a conffile, kept on upgrade"},
	"socket":   {"/run/lanes/lanes.sock", "the daemon's API socket (mode 0666: every local user reaches it; each request is checked against the caller's uid and the policy's access.group)"},
	"rtsock":   {"/run/lanes/rt.sock", "the realtime lane's client socket (the policy's realtime.socket)"},
	"state":    {"/var/lib/lanes/", "state that must outlive a crash: device settings to undo, the coop peers' sequence numbers ($STATE_DIRECTORY under systemd)"},
	"unit":     {"/lib/systemd/system/lanes.service", "the systemd unit that runs the daemon (section THE SYSTEMD UNIT of lanes-daemon(1))"},
	"rtd":      {"/usr/libexec/lanes/lanes-rtd", "the realtime lane's data path, run by the daemon (beside lanes or in ../libexec/lanes/)"},
	"examples": {"/usr/share/doc/lanes/examples/", "example policies: laptop.yaml, home-server.yaml, robot.yaml"},
	"traces":   {"/usr/share/lanes/traces/", "the lab's cellular link traces (mahimahi), searched after $LANES_TRACES"},
	"results":  {"results/EXPERIMENT-TIME/", "a lab run's results (JSON, environment, Markdown, PNG and SVG figures), below --results"},
	"cgroups":  {"/sys/fs/cgroup/.../lanes.*", "the lane cgroups lanes creates for lanes run, lanes move and task rules"},
	"kconfig":  {"/proc/config.gz, /boot/config-RELEASE", "the kernel's build configuration (the first found): HZ, the preemption model, the proc connector"},
	"preempt":  {"/sys/kernel/debug/sched/preempt", "the live preemption model of a PREEMPT_DYNAMIC kernel (debugfs, mounted if it is not); lanes tune preempt writes it"},
	"rtsysctl": {"/proc/sys/kernel/sched_rt_runtime_us, sched_rt_period_us", "real-time throttling: the CPU share real-time tasks may take"},
}

// manEnv: every environment variable a page may list (the pages list those
// their flags name, "env NAME", and those given in envFor).
var manEnv = map[string]string{
	"LANES_SOCKET":    "the daemon's API socket, instead of /run/lanes/lanes.sock",
	"LANES_RT_SOCKET": "the realtime lane's client socket, instead of /run/lanes/rt.sock (as the policy's realtime.socket moves it; lanes_rt.h and the clients read it too)",
	"LANES_TRACES":    "a folder searched first for the lab's cellular traces",
	"STATE_DIRECTORY": "the daemon's state folder, instead of /var/lib/lanes (systemd sets it from StateDirectory=)",
	"NOTIFY_SOCKET":   "systemd's notification socket: the daemon reports readiness and reloads there (Type=notify)",
	"JOURNAL_STREAM":  "set by systemd when stderr is the journal: the daemon then logs each line with its priority",
}

var envFor = map[string][]string{
	"":       {"LANES_SOCKET", "LANES_RT_SOCKET", "LANES_TRACES"},
	"rt":     {"LANES_RT_SOCKET"},
	"daemon": {"STATE_DIRECTORY", "NOTIFY_SOCKET", "JOURNAL_STREAM"},
	"lab":    {"LANES_TRACES"},
}

var clientFiles = []string{"socket", "policy"}

var manExtras = map[string]manExtra{
	"": {examples: []manExample{
		{"sudo install -m644 /usr/share/doc/lanes/examples/laptop.yaml /etc/lanes/policy.yaml", "start from the laptop example policy"},
		{"sudo systemctl enable --now lanes", "run the daemon under systemd"},
		{"lanes run --lane background -- rsync -a ~/photos backup:/photos", "a transfer that only takes what the rest leaves idle"},
		{"lanes status", "the lanes per interface, their counters and the registered flows"},
	}, files: []string{"policy", "socket", "state", "unit", "examples"}, see: []string{"lanes-policy(5)", "systemctl(1)", "tc(8)"}},
	"status": {examples: []manExample{
		{"lanes status", "per lane packets, bytes, drops and backlog per interface, TCP and UDP rates up and down now per lane, registrations, UDP flows with their rates; a refused reload (100 columns)"},
		{"lanes status -v", "every line whole, and the daemon's own UDP sockets"},
		{"lanes status --json | jq .interfaces", "the same as JSON"},
		{"lanes status --wait 30s", "once a daemon just started answers (scripts, the Quick start)"},
	}, files: clientFiles},
	"register": {examples: []manExample{
		{"lanes register --lane background --dst 192.0.2.10:443 --sport 40312", "put one TCP connection (remote address and port, local port) in background"},
		{"lanes register --proto udp --lane realtime --dst 10.0.0.2:9000 --sport 5000", "a UDP flow in realtime (needs access.group membership)"},
	}, files: clientFiles, see: []string{"lanes-unregister(1)"}},
	"unregister": {examples: []manExample{
		{"lanes unregister --dst 192.0.2.10:443 --sport 40312", "the flow goes back to the policy's lane"},
	}, files: clientFiles, see: []string{"lanes-register(1)"}},
	"run": {examples: []manExample{
		{"lanes run --lane background -- rsync -a ~/photos backup:/photos", "a whole process tree in background (and nice 19)"},
		{"lanes run --lane background --sched-idle -- make -j8", "a build that takes only idle CPU and network"},
	}, exit: "lanes run execs the command, so its exit status is the command's own exit status (128+N in the shell " +
		"for a command killed by signal N). Before the command runs: 1 when lanes fails (no daemon, the move refused, " +
		"the command not found), 2 on a usage error.",
		files: []string{"socket", "cgroups"}, see: []string{"lanes-move(1)", "nice(1)", "chrt(1)"}},
	"move": {examples: []manExample{
		{"sudo lanes move --lane background 4242", "a running process and its future children, like renice"},
		{"sudo lanes move --lane background --cgroup system.slice/backup.service", "every process of a service"},
	}, files: []string{"socket", "cgroups"}, see: []string{"lanes-run(1)", "renice(1)", "chrt(1)"}},
	"coop": {examples: []manExample{
		{"lanes coop status", "the daemon's cooperative controller: N, caps, peers"},
	}, files: clientFiles, see: []string{"lanes-policy(5)"}},
	"coop table": {examples: []manExample{
		{"lanes coop table", "the paper's cap table for 5 to 8 hosts at 20 Mbit/s and 256 ms"},
		{"lanes coop table --rate 50mbit --rtt 40ms --from 2 --to 4", "caps for another access point"},
	}},
	"coop peers": {examples: []manExample{
		{"sudo lanes coop peers --dev wlan0 --listen 5s", "the lanes hosts announcing on this Wi-Fi"},
		{"sudo lanes coop peers --dev wlan0 --key-file /etc/lanes/coop.key", "the same, authenticated with the group key"},
	}},
	"coop status": {examples: []manExample{
		{"lanes coop status", "N, the caps and why capping is on or off"},
		{"lanes coop status --json", "the controller's status document"},
	}, files: clientFiles},
	"daemon": {examples: []manExample{
		{"sudo lanes daemon --check --policy /etc/lanes/policy.yaml", "check a policy as the daemon would load it"},
		{"sudo systemctl enable --now lanes", "run the daemon under systemd with /etc/lanes/policy.yaml"},
		{"sudo systemctl reload lanes", "apply an edited policy (a broken one is refused, the running one kept)"},
		{"sudo lanes daemon --policy /etc/lanes/policy.yaml", "run it in the foreground; SIGHUP reloads, SIGTERM removes everything it installed"},
		{"lanes daemon --print-default-policy", "every key with its default"},
	}, files: []string{"policy", "socket", "rtsock", "state", "unit", "rtd", "examples"},
		see:      []string{"lanes-policy(5)", "lanes-reset(1)", "lanes-doctor(1)", "systemctl(1)", "journalctl(1)", "systemd.exec(5)"},
		sections: [][2]string{{"THE SYSTEMD UNIT", unitSection}}},
	"dashboard": {examples: []manExample{
		{"lanes dashboard", "serve http://127.0.0.1:8377/: live cwnd, caps, srtt per flow, lanes, coop; /metrics for Prometheus"},
		{"lanes dashboard --listen 0.0.0.0:8377", "reachable from the LAN (read-only)"},
	}, files: clientFiles, see: []string{"lanes-monitor(1)"}},
	"doctor": {examples: []manExample{
		{"sudo lanes doctor", "which kernel features are here, and what lanes does without each"},
		{"sudo lanes doctor --json", "the same as JSON"},
	}, files: []string{"kconfig", "preempt", "rtsysctl"}, see: []string{"lanes-daemon(1)"}},
	"lab": {examples: []manExample{
		{"lanes lab list", "the experiments"},
		{"sudo lanes lab demo", "a short lbe run with the paper's numbers (make demo)"},
	}, files: []string{"traces", "results"}},
	"lab list": {examples: []manExample{{"lanes lab list", "the experiments with one line each"}}},
	"lab demo": {examples: []manExample{
		{"sudo lanes lab demo", "foreground completion times with and without lanes, beside the paper's"},
	}, files: []string{"traces", "results"}},
	"lab report": {examples: []manExample{
		{"lanes lab report results/lbe-20261125-101500", "print a stored result again and redraw its figures"},
	}, files: []string{"results"}},
	"lab clean": {examples: []manExample{{"sudo lanes lab clean", "remove the network namespaces of lab runs that were killed"}}},
	"lab run": {examples: []manExample{
		{"sudo lanes lab run lbe --sizes 100,400 --reps 5", "the LW-LBE paper's figure 6 on the W-CDMA trace"},
	}, files: []string{"traces", "results"}},
	"latency": {examples: []manExample{
		{"sudo lanes latency --policy fifo --duration 30s", "timer wake-up latency at SCHED_FIFO 99"},
		{"sudo lanes latency --policy fifo --cpu-load 2 --net-load --compare-cyclictest", "under CPU and network load, beside cyclictest"},
	}, see: []string{"cyclictest(8)", "lanes-tune(1)"}},
	"monitor": {examples: []manExample{
		{"sudo lanes monitor", "live view of every TCP flow: cwnd, srtt, rate, lane and why"},
		{"sudo lanes monitor --json --duration 60s --output flows.json", "a minute of samples to a file"},
		{"lanes plot flows.json", "draw it (flows.png, flows.svg)"},
	}, files: clientFiles, see: []string{"lanes-plot(1)", "lanes-dashboard(1)", "ss(8)"}},
	"plot": {examples: []manExample{
		{"lanes plot flows.json --top 4 --title upload", "cwnd, RTT and throughput of the 4 biggest flows"},
	}, see: []string{"lanes-monitor(1)"}},
	"reset": {examples: []manExample{
		{"sudo lanes reset", "after kill -9 of the daemon: remove its qdiscs, classifier, cgroups and sockets"},
	}, files: []string{"socket", "rtsock", "state", "cgroups"}, see: []string{"lanes-daemon(1)"}},
	"rt": {examples: []manExample{
		{"lanes rt send --deadline 5ms --count 10 10.0.0.2:9000", "10 datagrams, each due on the wire 5 ms after its send"},
	}, files: []string{"rtsock", "policy"}},
	"rt send": {examples: []manExample{
		{"lanes rt send --deadline 5ms --count 10 10.0.0.2:9000", "10 datagrams with a 5 ms deadline; admitted and refused counted"},
		{"lanes rt send --json --size 200 --interval 10ms --count 100 10.0.0.2:9000", "100 control-sized datagrams, the result as JSON"},
	}, files: []string{"rtsock", "policy"}, see: []string{"lanes-rt-stats(1)", "lanes-policy(5)"}},
	"rt stats": {examples: []manExample{
		{"lanes rt stats", "per flow: sent, admitted, refused, late and dropped; the CPU wake-up latency held"},
	}, files: []string{"rtsock"}, see: []string{"lanes-rt-send(1)"}},
	"tune": {examples: []manExample{
		{"lanes tune", "the kernel's real-time settings: the preemption model and the modes it offers"},
	}, files: []string{"kconfig", "preempt", "rtsysctl"}, see: []string{"lanes-latency(1)"}},
	"tune preempt": {examples: []manExample{
		{"sudo lanes tune preempt full", "full preemption until reboot (PREEMPT_DYNAMIC kernels)"},
	}, files: []string{"preempt"}, see: []string{"lanes-latency(1)"}},
	"version": {examples: []manExample{{"lanes version", "the version, as lanes --version prints it"}}},
}

// extraFor returns the hand-written sections of the command at path (the
// words after "lanes"); an experiment's page ("lab run NAME") gets its own
// run and report examples.
func extraFor(path string) (manExtra, bool) {
	if x, ok := manExtras[path]; ok {
		return x, true
	}
	if name, ok := strings.CutPrefix(path, "lab run "); ok {
		n := name
		return manExtra{examples: []manExample{
			{"sudo lanes lab run " + n, "run the experiment; results in results/" + n + "-TIME/"},
			{"sudo lanes lab run " + n + " --json", "the result as JSON on stdout too"},
			{"lanes lab report results/" + n + "-*", "print it again and redraw its figures"},
		}, files: []string{"traces", "results"}, see: []string{"lanes-lab-report(1)"}}, true
	}
	return manExtra{}, false
}

// unitSection documents lanes.service (dist/lanes.service.in).
const unitSection = `The package installs
.B lanes.service
disabled: review /etc/lanes/policy.yaml, then
.B systemctl enable \-\-now lanes.
The unit runs
.B lanes daemon \-\-policy /etc/lanes/policy.yaml
after checking the policy (ExecStartPre=), as Type=notify: systemd counts it
started once the datapath is installed and the API serves.
.TP
.B systemctl reload lanes
checks the policy first: a broken one fails the reload and the running
policy stays; a good one is applied whole (SIGHUP).
.TP
.B systemctl stop lanes
the daemon removes everything it installed (qdiscs, BPF programs, lane
cgroups, sockets); ExecStopPost= runs
.B lanes reset
for what a crashed daemon left.
.TP
.B apt upgrade
restarts a running (or enabled) daemon on the new binary; the policy, a
conffile, is kept; removing the package stops the daemon, purging it
removes /var/lib/lanes.
.TP
.B journalctl \-u lanes \-p warning
the daemon's warnings and errors, each with its priority.
.PP
Sandboxing: only the capabilities the daemon uses (CapabilityBoundingSet=),
a read-only system but for /sys, /run/lanes and /var/lib/lanes
(ProtectSystem=strict), a private /dev with /dev/cpu_dma_latency bound in,
Delegate=yes for the lane cgroups; systemd-analyze security rates its
exposure about 4.6 (OK). Override settings with
.B systemctl edit lanes.`
