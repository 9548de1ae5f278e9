// quickstart_test.go: the README's Quick start, pasted whole into bash as
// a new user would, runs line by line without an error: in a copy of the
// tree (make build writes bin/ there), in a fresh network namespace whose
// default route leads over a veth (the laptop policy follows the default
// route), with /etc and /var/lib overlaid and /run/lanes a private tmpfs
// (the block installs /etc/lanes/policy.yaml; the daemon keeps state in
// /var/lib/lanes and its socket in /run/lanes): nothing reaches the host's
// files. The daemon the block starts must exit 0 on its `kill %1` and
// leave no qdisc on the interface.
package examples_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/testutil"
)

// quickStart returns the README's first code block after "## Quick start".
func quickStart(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no ## Quick start")
	}
	_, after, ok = strings.Cut(after, "\n```\n")
	block, _, ok2 := strings.Cut(after, "\n```\n")
	if !ok || !ok2 || !strings.Contains(block, "lanes daemon") {
		t.Fatalf("README.md's Quick start has no code block with the daemon:\n%.300s", after)
	}
	return block + "\n"
}

// copyTree copies the checkout's files (tracked, and new ones not ignored)
// into a scratch folder: a clean tree as a user has after cloning.
func copyTree(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"git", "tar", "make", "unshare", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH", tool)
		}
	}
	if err := exec.Command("git", "-C", "..", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout: the tree to copy is unknown")
	}
	dst := filepath.Join(t.TempDir(), "lanes")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	cp := exec.Command("bash", "-o", "pipefail", "-c",
		`git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$1"`, "copy", dst)
	cp.Dir = ".."
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copying the tree: %v\n%s", err, out)
	}
	return dst
}

// privateRunLanes makes /run/lanes exist for the tmpfs mounted over it,
// and removes it afterwards if this test made it and it is still empty.
func privateRunLanes(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/run/lanes"); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir("/run/lanes", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove("/run/lanes") })
	}
}

// quickStartRun is what a run of the Quick start left: the copied tree
// (with bin/lanes), the scratch folder whose etc-up holds the policy the
// block installed, the namespaces it ran in and its output.
type quickStartRun struct {
	tree, scratch string
	pair          *testutil.Pair
	out           string
}

// runQuickStart pastes the README's Quick start into bash in a fresh
// namespace (see the file's comment) and fails the test if a line fails.
func runQuickStart(t *testing.T) quickStartRun {
	t.Helper()
	testutil.RequireRoot(t)
	block := quickStart(t)
	tree := copyTree(t)
	p := testutil.NewVethPair(t)
	p.A.Do(t, func() error {
		return netlink.RouteAdd(&netlink.Route{Gw: p.AddrB})
	})
	privateRunLanes(t)
	scratch := t.TempDir()
	for _, d := range []string{"etc-up", "etc-work", "lib-up", "lib-work"} {
		if err := os.Mkdir(filepath.Join(scratch, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The block as pasted; around it: on a failed line the daemon it
	// started is stopped, and at the end its exit is waited for (kill %1
	// asks it to remove what it installed).
	script := "set -e\ntrap 'kill %1 2>/dev/null || true; wait' EXIT\n" + block +
		"rc=0; wait %1 || rc=$?; echo \"the daemon's exit status: $rc\"; exit $rc\n"
	if err := os.WriteFile(filepath.Join(scratch, "quickstart.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	private := `set -e
mount -t overlay overlay -o lowerdir=/etc,upperdir="$1/etc-up",workdir="$1/etc-work" /etc
mount -t overlay overlay -o lowerdir=/var/lib,upperdir="$1/lib-up",workdir="$1/lib-work" /var/lib
mount -t tmpfs -o mode=0755 tmpfs /run/lanes
cd "$2"
exec bash -x "$1/quickstart.sh"`
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(10*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.A.Name, "unshare", "--mount", "--propagation", "private",
		"bash", "-c", private, "private", scratch, tree)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("the Quick start pasted into bash -x (%.1f s):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("the Quick start failed: %v (the last line run is the last '+' line above)", err)
	}
	return quickStartRun{tree: tree, scratch: scratch, pair: p, out: string(out)}
}

// checkNoQdisc fails the test if an htb or clsact qdisc is left on ns's link.
func checkNoQdisc(t *testing.T, ns *testutil.NetNS, link, after string) {
	t.Helper()
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		qd, err := netlink.QdiscList(l)
		for _, q := range qd {
			if q.Type() == "htb" || q.Type() == "clsact" {
				t.Errorf("after %s: %s qdisc left on %s", after, q.Type(), link)
			}
		}
		return err
	})
}

func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lanes and runs a daemon")
	}
	checkQuickStart(t, runQuickStart(t))
}

// checkQuickStart checks what the Quick start printed and left.
func checkQuickStart(t *testing.T, run quickStartRun) {
	t.Helper()
	out, scratch, tree, p := run.out, run.scratch, run.tree, run.pair
	for _, want := range []string{
		"policy /etc/lanes/policy.yaml: ok",    // the checker
		"policy /etc/lanes/policy.yaml  since", // status reached the daemon
		"lanes will work here: ",               // doctor's verdict
		"registered flows: 1\n  background ",   // status lists the registered flow
		"/background\n",                        // lanes run's cgroup: 0::/lanes.INSTANCE/background
		"msg=\"policy reloaded\"",              // kill -HUP %1
		"the daemon's exit status: 0",
		"+ kill %1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the Quick start's output lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(scratch, "etc-up", "lanes", "policy.yaml")); err != nil {
		t.Errorf("the policy did not go to the overlaid /etc: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tree, "bin", "lanes-rtd")); err != nil {
		t.Errorf("make build made no bin/lanes-rtd: %v", err)
	}
	checkNoQdisc(t, p.A, p.LinkA, "kill %1")
}
