// doccheck_test.go: no commit hash in the reference pages, Go comments or
// the comments of lanes' own C (BPF programs, lanes-rtd, clients).
package doccheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commitLike is a word of 7 to 40 hex digits: an abbreviated or full
// commit hash when it has both a digit and a letter; one of digits only
// when the text calls it a commit (digitCommit) or it names one of the
// repository's commits (isCommit). A 0x constant is no word of its own (x
// is a word character) and a sha256 (64 digits) is longer.
var commitLike = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// digitCommit is a word of digits only where a text cites a commit:
// "since", "commit" or an opening parenthesis before seven or more
// digits, a closing one or a comma after them.
var digitCommit = regexp.MustCompile(`\b(since|commit) ([0-9]{7,40})\b|\(([0-9]{7,40})(\)|, )`)

// isCommit says whether a word names a commit of the repository (false
// without git or its history).
var isCommit = func(w string) bool {
	return exec.Command("git", "cat-file", "-e", w+"^{commit}").Run() == nil
}

func hashes(text string) []string {
	var found []string
	for _, w := range commitLike.FindAllString(text, -1) {
		letters := strings.ContainsAny(w, "abcdef")
		if letters && strings.ContainsAny(w, "0123456789") || !letters && isCommit(w) {
			found = append(found, w)
		}
	}
	for _, m := range digitCommit.FindAllStringSubmatch(text, -1) {
		w := m[2] + m[3]
		if !slices.Contains(found, w) {
			found = append(found, w)
		}
	}
	return found
}

func TestCommitLike(t *testing.T) {
	for text, want := range map[string]int{
		"since 0cc63ac: the drain":                                                1,
		"(results/coop.md, 2026-11-25, a0b6d92e1f)":                               1,
		"0x7fffffff and 0xdeadbeef1":                                              0,
		"deadbeef, facade, 1234567":                                               0,
		"sha256 0100eea9fdf5cc925b9073b47684bba85b531657610e634be8bf90264a32b552": 0,
		"(since 5687678), from what":                                              1,
		"(3872547, [results/coop.md](results/coop.md))":                           1,
		"the walk (8439940): at most":                                             1,
		"1000000 ns, 2147483647 (INT_MAX)":                                        0,
	} {
		if got := hashes(text); len(got) != want {
			t.Errorf("%q: found %q, want %d", text, got, want)
		}
	}
}

// TestReferenceNamesNoCommit: docs/*.md (not docs/results/), README.md,
// every Go comment and every comment of lanes' own C are free of commit
// hashes.
func TestReferenceNamesNoCommit(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no reference pages under docs/: %v", err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if h := hashes(line); len(h) > 0 {
				t.Errorf("%s:%d names commit %v (dated results go in docs/results/)", rel(root, p), i+1, h)
			}
		}
	}
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "bin" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		switch {
		case e.IsDir():
		case strings.HasSuffix(p, ".go"):
			checkGoComments(t, root, p)
		case (strings.HasSuffix(p, ".c") || strings.HasSuffix(p, ".h")) && !vendoredC(root, p):
			checkCComments(t, root, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkGoComments(t *testing.T, root, path string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", rel(root, path), err)
		return
	}
	for _, group := range f.Comments {
		for _, c := range group.List {
			if h := hashes(c.Text); len(h) > 0 {
				pos := fset.Position(c.Pos())
				t.Errorf("%s:%d: comment names commit %v (commit messages carry history)", rel(root, path), pos.Line, h)
			}
		}
	}
}

// vendoredC: the libbpf and UAPI headers internal/bpf/include/update.sh
// copies in, and the kernel models coretest compiles, are others' text.
func vendoredC(root, p string) bool {
	r := filepath.ToSlash(rel(root, p))
	return strings.HasPrefix(r, "internal/bpf/include/bpf/") || strings.HasPrefix(r, "internal/bpf/include/linux/bpf") ||
		strings.HasPrefix(r, "internal/bpf/include/linux/pkt_") || strings.HasPrefix(r, "internal/bpf/coretest/testdata/")
}

// cComment is a C comment: /* ... */ or // to the end of the line.
var cComment = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)

func checkCComments(t *testing.T, root, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range cComment.FindAllIndex(b, -1) {
		if h := hashes(string(b[loc[0]:loc[1]])); len(h) > 0 {
			line := 1 + strings.Count(string(b[:loc[0]]), "\n")
			t.Errorf("%s:%d: comment names commit %v (commit messages carry history)", rel(root, path), line, h)
		}
	}
}

func rel(root, p string) string {
	r, _ := filepath.Rel(root, p)
	return r
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}
