// cites_test.go: what the text cites is in the repository: every relative
// link of the Markdown pages (README.md, docs/, docs/results/) and every
// docs/*.md a Go comment names; the papers are cited through
// docs/papers.md, each section by its number; no stray file is tracked.
package doccheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s#:]+)(#[^)]*)?\)`)
	docName = regexp.MustCompile(`\bdocs/[a-z0-9/_-]+\.md\b`)
	paperNo = regexp.MustCompile(`papers\.md\)? (§00[0-9])`)
	// topName: a top-level page named in capitals (README.md), which must
	// be the repository's or its docs' own
	topName = regexp.MustCompile(`\b[A-Z][A-Z0-9_]+\.md\b`)
)

// checkTopNames: each capitalised page text names is in root or docs/.
func checkTopNames(t *testing.T, root, name, text string) {
	t.Helper()
	for _, n := range topName.FindAllString(text, -1) {
		_, e1 := os.Stat(filepath.Join(root, n))
		_, e2 := os.Stat(filepath.Join(root, "docs", n))
		if e1 != nil && e2 != nil {
			t.Errorf("%s cites %s, which is not in the repository", name, n)
		}
	}
}

func TestCitedFilesExist(t *testing.T) {
	root := repoRoot(t)
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	results, _ := filepath.Glob(filepath.Join(root, "docs", "results", "*.md"))
	pages = append(append(pages, results...), filepath.Join(root, "README.md"))
	papers, err := os.ReadFile(filepath.Join(root, "docs", "papers.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), m[1])); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", rel(root, p), m[1])
			}
		}
		checkPaperNumbers(t, rel(root, p), string(b), string(papers))
		checkTopNames(t, root, rel(root, p), string(b))
	}
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() && (e.Name() == ".git" || e.Name() == "bin") {
			return skipDir(err)
		}
		if !e.IsDir() && strings.HasSuffix(p, ".go") {
			checkGoCites(t, root, p, string(papers))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func skipDir(err error) error {
	if err != nil {
		return err
	}
	return filepath.SkipDir
}

// checkPaperNumbers: each "papers.md §00N" has its section in papers.
func checkPaperNumbers(t *testing.T, name, text, papers string) {
	t.Helper()
	for _, m := range paperNo.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(papers, "\n## "+strings.TrimPrefix(m[1], "§")+" ") {
			t.Errorf("%s cites %s, which docs/papers.md lacks", name, m[1])
		}
	}
}

func checkGoCites(t *testing.T, root, path, papers string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return // the commit check reports it
	}
	for _, group := range f.Comments {
		text := group.Text()
		for _, d := range docName.FindAllString(text, -1) {
			if _, err := os.Stat(filepath.Join(root, d)); err != nil {
				t.Errorf("%s: a comment cites %s, which is not in the repository", rel(root, path), d)
			}
		}
		checkPaperNumbers(t, rel(root, path), text, papers)
		checkTopNames(t, root, rel(root, path), text)
	}
}

// TestNoStrayFiles: no tracked file is a merge's or an editor's left-over.
func TestNoStrayFiles(t *testing.T) {
	out, err := exec.Command("git", "-C", repoRoot(t), "ls-files").Output()
	if err != nil {
		t.Skipf("no git history here: %v", err)
	}
	for _, f := range strings.Split(string(out), "\n") {
		for _, suffix := range []string{".orig", ".rej", "~", ".swp"} {
			if strings.HasSuffix(f, suffix) {
				t.Errorf("%s is tracked: a left-over (%s)", f, suffix)
			}
		}
	}
}
