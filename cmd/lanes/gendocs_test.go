// gendocs_test.go: the man pages as Debian admins expect them: every
// command's page has EXAMPLES, the pages whose commands touch files have
// FILES, the daemon's names its policy and unit, no flag renders a help
// text fragment as its argument, man(1) reads every page without a
// warning, and lanes-policy(5) holds every heading, table row and key of
// docs/policy.md and of the default policy.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/lanes-net/lanes/internal/manpage"
	"github.com/lanes-net/lanes/internal/policy"
)

const policyDoc = "../../docs/policy.md"

func genManPages(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := writeManPages(buildTree(&env{getenv: func(string) string { return "" }}), dir, policyDoc); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readPage(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestManPagesSections(t *testing.T) {
	dir := genManPages(t)
	root := buildTree(&env{getenv: func(string) string { return "" }})
	pages, withFiles := 0, 0
	for _, c := range allCommands(root) {
		if (!c.IsAvailableCommand() && c.HasParent()) || c.Name() == "help" || c.Name() == "completion" ||
			(c.HasParent() && c.Parent().Name() == "completion") {
			continue
		}
		if _, ok := extraFor(treePath(c)); !ok {
			t.Errorf("%s: no hand-written EXAMPLES in manpages.go", c.CommandPath())
		}
		page := readPage(t, filepath.Join(dir, "man1", manName(c)+".1"))
		for _, sec := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "EXAMPLES", "EXIT STATUS", "SEE ALSO"} {
			if !strings.Contains(page, "\n.SH "+sec+"\n") {
				t.Errorf("%s.1 lacks %s", manName(c), sec)
			}
		}
		if strings.Contains(page, "\n.SH FILES\n") {
			withFiles++
		}
		pages++
	}
	t.Logf("%d section-1 pages, all with EXAMPLES; %d with FILES", pages, withFiles)
	daemon := readPage(t, filepath.Join(dir, "man1", "lanes-daemon.1"))
	for _, want := range []string{"/etc/lanes/policy.yaml", "/run/lanes/lanes.sock", "/var/lib/lanes", "lanes.service",
		".SH THE SYSTEMD UNIT", "lanes\\-policy(5)", ".SH ENVIRONMENT", "STATE_DIRECTORY"} {
		if !strings.Contains(daemon, want) {
			t.Errorf("lanes-daemon.1 lacks %q", want)
		}
	}
	// The kernel-facing commands name what they read and write.
	for page, want := range map[string][]string{
		"lanes-doctor.1":       {"/proc/config.gz", "/sys/kernel/debug/sched/preempt", "sched_rt_runtime_us"},
		"lanes-tune.1":         {"/proc/config.gz", "/sys/kernel/debug/sched/preempt"},
		"lanes-tune-preempt.1": {"/sys/kernel/debug/sched/preempt"},
	} {
		text := readPage(t, filepath.Join(dir, "man1", page))
		files, _, _ := strings.Cut(text[strings.Index(text, "\n.SH FILES\n")+1:], "\n.SH SEE ALSO")
		for _, w := range want {
			if !strings.Contains(text, "\n.SH FILES\n") || !strings.Contains(files, w) {
				t.Errorf("%s: FILES lacks %s", page, w)
			}
		}
	}
	// Every variable a flag's help names is documented in ENVIRONMENT.
	for _, c := range allCommands(root) {
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			for _, m := range envRef.FindAllStringSubmatch(f.Usage, -1) {
				if _, ok := manEnv[m[1]]; !ok {
					t.Errorf("%s --%s names %s, which manEnv does not describe (its page would leave it out)", c.CommandPath(), f.Name, m[1])
				}
			}
		})
	}
	for page, v := range map[string]string{"lanes-rt-send.1": "LANES_RT_SOCKET", "lanes-rt-stats.1": "LANES_RT_SOCKET", "lanes-status.1": "LANES_SOCKET"} {
		if text := readPage(t, filepath.Join(dir, "man1", page)); !strings.Contains(text, "\n.SH ENVIRONMENT\n.TP\n.B "+v+"\n") {
			t.Errorf("%s: ENVIRONMENT lacks %s", page, v)
		}
	}
	for key, f := range manFiles {
		if f[0] == "" || f[1] == "" {
			t.Errorf("manFiles[%s] incomplete", key)
		}
	}
	for path, x := range manExtras {
		for _, k := range x.files {
			if _, ok := manFiles[k]; !ok {
				t.Errorf("manExtras[%q]: unknown file %q", path, k)
			}
		}
	}
}

// TestManFlagsRenderTheirType: pflag reads a `quoted` word in a flag's help
// as its argument's name (a flag naming `lanes reset` rendered as
// "--flag lanes reset"): no help text may hold one.
func TestManFlagsRenderTheirType(t *testing.T) {
	root := buildTree(&env{getenv: func(string) string { return "" }})
	for _, c := range allCommands(root) {
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("%s --%s: a backquote in its help makes %q its argument's name", c.CommandPath(), f.Name, name)
			}
		})
	}
}

// TestManPagesWithoutWarnings: man(1) formats every page without a warning.
func TestManPagesWithoutWarnings(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man not installed")
	}
	dir := genManPages(t)
	pages, _ := filepath.Glob(filepath.Join(dir, "man*", "*"))
	for _, p := range pages {
		cmd := exec.Command("man", "--warnings", "-l", p)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8")
		cmd.Stdout = nil
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("man -l %s: %v", filepath.Base(p), err)
		}
		// CombinedOutput holds the page too: warnings are groff's "<standard input>:" lines.
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "warning:") || strings.Contains(line, "<standard input>:") {
				t.Errorf("man -l %s: %s", filepath.Base(p), line)
			}
		}
	}
}

// TestPolicyManAgreesWithDoc: lanes-policy(5) is docs/policy.md rendered:
// each of its headings and table rows, and every key of the default
// policy, appears in the page.
func TestPolicyManAgreesWithDoc(t *testing.T) {
	dir := genManPages(t)
	page := readPage(t, filepath.Join(dir, "man5", "lanes-policy.5"))
	md := readPage(t, policyDoc)
	n := 0
	lines := strings.Split(md, "\n")
	for i, line := range lines {
		header := i+1 < len(lines) && strings.HasPrefix(lines[i+1], "| ---")
		var want string
		switch {
		case header:
			continue
		case strings.HasPrefix(line, "## "):
			want = ".SH " + manpage.Inline(strings.ToUpper(line[3:]))
		case strings.HasPrefix(line, "### "):
			want = ".SS " + manpage.Inline(line[4:])
		case strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| ---"):
			want = ".TP\n" + manpage.Inline(cells(line)[0]) + "\n"
		default:
			continue
		}
		n++
		if !strings.Contains(page, want) {
			t.Errorf("lanes-policy.5 lacks %q (docs/policy.md: %s)", want, line)
		}
	}
	text := regexp.MustCompile(`\\f[BIR]`).ReplaceAllString(strings.ReplaceAll(page, `\-`, "-"), "")
	for _, key := range defaultPolicyKeys(t) {
		if !strings.Contains(text, key) {
			t.Errorf("lanes-policy.5 never names the default policy's key %q", key)
		}
	}
	t.Logf("%d headings and rows of docs/policy.md in lanes-policy.5", n)
}

func cells(line string) []string {
	line = strings.Trim(strings.TrimSpace(line), "|")
	var out []string
	for _, c := range strings.Split(line, "|") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}

// defaultPolicyKeys: every mapping key of the embedded default policy.
func defaultPolicyKeys(t *testing.T) []string {
	var doc yaml.Node
	if err := yaml.Unmarshal(policy.DefaultYAML(), &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				keys = append(keys, n.Content[i].Value)
				walk(n.Content[i+1])
			}
			return
		}
		for _, k := range n.Content {
			walk(k)
		}
	}
	walk(&doc)
	return keys
}

// TestManPagesCiteNoSourceFiles: man pages are for users: lanes-policy(5)
// cited internal/policy/match.go and others, and pages said "the paper's
// 3-tuple" and "LW-LBE" where a user reads addresses and ports.
func TestManPagesCiteNoSourceFiles(t *testing.T) {
	dir := genManPages(t)
	source := regexp.MustCompile(`\binternal/|\bcmd/lanes\b|\b[a-z_]+\.go\b|SEEDS`)
	// the lab's pages name the papers whose experiments they run
	jargon := regexp.MustCompile(`the paper's 3\\-tuple|LW\\-LBE`)
	pages, _ := filepath.Glob(filepath.Join(dir, "man*", "*"))
	for _, p := range pages {
		lab := strings.HasPrefix(filepath.Base(p), "lanes-lab")
		for i, line := range strings.Split(readPage(t, p), "\n") {
			m := source.FindString(line)
			if m == "" && !lab {
				m = jargon.FindString(line)
			}
			if m != "" {
				t.Errorf("%s:%d cites %q: %.120s", filepath.Base(p), i+1, m, line)
			}
		}
	}
}

// TestManRunPassesExitStatusOn: lanes run execs the command, so its exit
// status is the command's; lanes-run(1) documented only 0, 1 and 2.
func TestManRunPassesExitStatusOn(t *testing.T) {
	page := readPage(t, filepath.Join(genManPages(t), "man1", "lanes-run.1"))
	_, exit, _ := strings.Cut(page, "\n.SH EXIT STATUS\n")
	exit, _, _ = strings.Cut(exit, "\n.SH ")
	if !strings.Contains(exit, "the command's own exit status") {
		t.Errorf("lanes-run(1) EXIT STATUS does not say the command's exit status is passed on:\n%s", exit)
	}
}
