// Package leaks finds what lanes may have left on a machine: files under
// its runtime and state directories, lane cgroups (the instances' own and
// those nested in host cgroups), cgroup2 mounts under /run/lanes, the
// tests' cgroup v1 mounts (lanes-cpuset*), test
// network namespaces, loaded BPF programs, struct_ops congestion controls
// named lanes* and struct_ops maps registered by map update (kernels before
// 6.4: they outlive a killed daemon), and lanes-rtd processes (the realtime
// data path, which must end with its daemon). `make test` ends with it (leakcheck): after a run
// nothing of lanes may remain.
package leaks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/structops"
)

// Dirs where lanes keeps files; each entry in them is a leftover.
var Dirs = []string{"/run/lanes", "/var/lib/lanes"}

// Find lists every leftover found, one line each.
func Find() []string {
	var out []string
	out = append(out, files()...)
	out = append(out, mounts()...)
	out = append(out, cgroups()...)
	out = append(out, netns()...)
	out = append(out, programs()...)
	out = append(out, congestionControls()...)
	out = append(out, structOpsMaps()...)
	out = append(out, processes()...)
	sort.Strings(out)
	return out
}

func files() []string {
	var out []string
	for _, dir := range Dirs {
		_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return nil
			}
			switch {
			case !e.IsDir():
				out = append(out, "file "+p)
			case strings.HasPrefix(e.Name(), "cgroup2"):
				out = append(out, "cgroup2 mount point "+p) // a daemon's private mount, left by a crash
			}
			return nil
		})
	}
	return out
}

// mounts: anything mounted under the runtime directories, and the cgroup
// v1 hierarchies the tests' Android groups mount in a temporary directory
// (testutil.NewAndroidGroups: lanes-cpuset*, left by a killed test).
func mounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		for _, dir := range Dirs {
			if f[4] == dir || strings.HasPrefix(f[4], dir+"/") {
				out = append(out, "mount "+f[4])
			}
		}
		if strings.HasPrefix(filepath.Base(f[4]), "lanes-cpuset") {
			out = append(out, "mount "+f[4])
		}
	}
	return out
}

// cgroups: directories named lanes.* anywhere in the cgroup v2 hierarchy.
func cgroups() []string {
	root := cgroup2Root()
	if root == "" {
		return nil
	}
	var out []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		if strings.HasPrefix(e.Name(), "lanes.") || strings.HasPrefix(e.Name(), "lanes-test-") {
			out = append(out, "cgroup "+p)
			return fs.SkipDir
		}
		return nil
	})
	return out
}

func cgroup2Root() string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 && f[3] == "/" {
			if !strings.HasPrefix(f[4], "/run/lanes") {
				return f[4]
			}
		}
	}
	return ""
}

// netns: named namespaces of the tests (testutil: lt*) and the lab (lanes*).
func netns() []string {
	es, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "lt") || strings.HasPrefix(e.Name(), "lanes") {
			out = append(out, "netns "+e.Name())
		}
	}
	return out
}

// programs: loaded BPF programs whose name starts with lanes (the kernel
// keeps the first 15 bytes of the C function name).
func programs() []string {
	var out []string
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) || err != nil {
			return out
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err == nil && strings.HasPrefix(info.Name, "lanes") {
			out = append(out, fmt.Sprintf("bpf program %d %s (%s)", id, info.Name, info.Type))
		}
		p.Close()
	}
}

// congestionControls: struct_ops congestion controls lanes registered.
func congestionControls() []string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return nil
	}
	var out []string
	for _, cc := range strings.Fields(string(b)) {
		if strings.HasPrefix(cc, "lanes") {
			out = append(out, "congestion control "+cc)
		}
	}
	return out
}

// structOpsMaps: struct_ops maps named lanes* registered by map update
// (internal/bpf/structops); each keeps its congestion control registered
// and its programs loaded until its element is deleted (`lanes reset`, or
// the next start of the daemon that left it).
func structOpsMaps() []string {
	left, err := structops.Find(structops.IsLanes)
	if err != nil {
		return []string{"struct_ops maps not listed: " + err.Error()}
	}
	var out []string
	for _, l := range left {
		out = append(out, fmt.Sprintf("struct_ops map %d %s (registered by map update)", l.ID, l.Name))
	}
	return out
}

// processes: running lanes-rtd processes, by their command name.
func processes() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == "lanes-rtd" {
			out = append(out, "process lanes-rtd pid "+e.Name())
		}
	}
	return out
}

// Split divides leftovers found now into those already in before (left by
// an earlier, killed run) and those added since.
func Split(now, before []string) (old, added []string) {
	had := make(map[string]bool, len(before))
	for _, b := range before {
		had[b] = true
	}
	for _, n := range now {
		if had[n] {
			old = append(old, n)
		} else {
			added = append(added, n)
		}
	}
	return old, added
}

// TempFiles lists what is left in dir, the TMPDIR `make test` gives the
// tests (t.TempDir, and whatever the programs they start put in TMPDIR):
// every entry is a leftover, since the directory was empty before the run.
func TempFiles(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return []string{fmt.Sprintf("temporary directory %s unreadable: %v", dir, err)}
	}
	var out []string
	for _, e := range entries {
		out = append(out, "temporary file "+filepath.Join(dir, e.Name()))
	}
	return out
}
