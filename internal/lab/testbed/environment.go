// environment.go: recording the environment a run measured in.
package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lab/topo"
)

// Environment is everything that could explain a difference between two
// runs of one experiment.
type Environment struct {
	Time         time.Time          `json:"time"`
	Kernel       string             `json:"kernel"`
	Machine      string             `json:"machine"`
	CPUs         int                `json:"cpus"`
	GoVersion    string             `json:"go"`
	LanesVersion string             `json:"lanes_version"`
	Policy       string             `json:"policy,omitempty"`
	PolicyText   string             `json:"policy_text,omitempty"`
	HostCC       string             `json:"host_congestion_control"`
	Preempt      string             `json:"preempt,omitempty"`
	Nodes        map[string]NodeEnv `json:"nodes"`
	Extra        map[string]string  `json:"extra,omitempty"`
}

// NodeEnv is one namespace's network settings.
type NodeEnv struct {
	Namespace         string            `json:"namespace"`
	CongestionControl string            `json:"congestion_control"`
	Qdiscs            string            `json:"qdiscs"`  // tc -s qdisc
	Classes           string            `json:"classes"` // tc -s class
	Links             string            `json:"links"`   // ip -d -s link
	Offloads          map[string]string `json:"offloads,omitempty"`
	BQL               map[string]string `json:"bql,omitempty"` // dev/queue -> limit_max
	Sysctls           map[string]string `json:"sysctls,omitempty"`
}

// CaptureEnvironment records the machine and every node of t (call it
// before the topology is closed, after traffic, so qdisc counters show).
func CaptureEnvironment(t *topo.Topology, env *Env, extra map[string]string) *Environment {
	var u unix.Utsname
	_ = unix.Uname(&u)
	e := &Environment{
		Time:         time.Now().UTC(),
		Kernel:       cstr(u.Release[:]) + " " + cstr(u.Version[:]),
		Machine:      cstr(u.Machine[:]),
		CPUs:         runtime.NumCPU(),
		GoVersion:    runtime.Version(),
		LanesVersion: Version,
		HostCC:       ReadTrim("/proc/sys/net/ipv4/tcp_congestion_control"),
		Nodes:        map[string]NodeEnv{},
		Extra:        extra,
	}
	if b, err := os.ReadFile("/sys/kernel/debug/sched/preempt"); err == nil {
		e.Preempt = strings.TrimSpace(string(b))
	} else {
		e.Preempt = strings.TrimSpace(cstr(u.Version[:]))
	}
	if env != nil {
		e.Policy = env.Policy
		if e.Policy == "" {
			e.Policy = env.LastPolicy
		}
		if b, err := os.ReadFile(e.Policy); err == nil && e.Policy != "" {
			e.PolicyText = string(b)
		}
	}
	if t == nil {
		return e
	}
	for _, n := range t.Nodes() {
		ne := NodeEnv{Namespace: n.NS, Offloads: map[string]string{}, BQL: map[string]string{}, Sysctls: map[string]string{}}
		ne.Qdiscs, _ = n.Run("tc", "-s", "qdisc", "show")
		ne.Classes, _ = n.Run("tc", "-s", "class", "show", "dev", "up0")
		ne.Links, _ = n.Run("ip", "-d", "-s", "link", "show")
		_ = n.Do(func() error {
			ne.CongestionControl = ReadTrim("/proc/sys/net/ipv4/tcp_congestion_control")
			for _, s := range []string{"net/ipv4/tcp_ecn", "net/ipv4/tcp_limit_output_bytes", "net/ipv4/tcp_notsent_lowat",
				"net/core/default_qdisc", "net/ipv4/tcp_wmem", "net/ipv4/tcp_rmem", "net/ipv4/tcp_slow_start_after_idle",
				"net/ipv4/tcp_no_metrics_save"} {
				ne.Sysctls[s] = ReadTrim("/proc/sys/" + s)
			}
			devs, _ := filepath.Glob("/sys/class/net/*")
			for _, d := range devs {
				name := filepath.Base(d)
				qs, _ := filepath.Glob(d + "/queues/tx-*/byte_queue_limits/limit_max")
				for _, q := range qs {
					ne.BQL[name+"/"+filepath.Base(filepath.Dir(filepath.Dir(q)))] = ReadTrim(q)
				}
			}
			return nil
		})
		if _, err := exec.LookPath("ethtool"); err == nil {
			out, _ := n.Run("ethtool", "-k", "up0")
			ne.Offloads["up0"] = out
		} else {
			ne.Offloads["note"] = "ethtool not installed; TUN devices here have no offloads enabled (IFF_TUN without IFF_VNET_HDR)"
		}
		e.Nodes[n.Name] = ne
	}
	return e
}

// ReadTrim is a file's content without surrounding space (empty when it
// cannot be read): a sysfs or procfs value.
func ReadTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func cstr(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
