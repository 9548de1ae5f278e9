// gencheck_test.go: rebuild every BPF object into a scratch copy of the
// sources and compare with the committed bytes; check that every generate
// line builds hermetically.
package gencheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const bpf2goRun = "go run github.com/cilium/ebpf/cmd/bpf2go "

// directive is one //go:generate line that builds BPF.
type directive struct {
	dir, file, pkg string   // relative to the repository root
	args           []string // the command, split as go generate splits it
	line           int
}

func (d directive) String() string { return fmt.Sprintf("%s:%d", filepath.Join(d.dir, d.file), d.line) }

// TestGenerateLinesHermetic: every generate line that builds BPF names the
// pinned clang, -nostdinc (no include folder of the build machine) and
// -Werror. It needs no compiler.
func TestGenerateLinesHermetic(t *testing.T) {
	ds := directives(t, repoRoot(t))
	if len(ds) < 10 {
		t.Fatalf("found %d BPF generate lines, want every object's (>= 10)", len(ds))
	}
	for _, d := range ds {
		line := strings.Join(d.args, " ")
		for _, want := range []string{PinnedClang, "-nostdinc", "-Werror"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: %q lacks %s", d, line, want)
			}
		}
		if strings.Contains(line, "/usr/include") {
			t.Errorf("%s: %q reads the build machine's headers", d, line)
		}
	}
}

// TestObjectsMatchSources rebuilds every object into a scratch copy of the
// C sources and compares each output with the committed file.
func TestObjectsMatchSources(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds every BPF object")
	}
	for _, tool := range []string{PinnedClang, "llvm-strip-" + strings.TrimPrefix(PinnedClang, "clang-")} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (the pinned BPF compiler) is not installed: scripts/deps.sh generate", tool)
		}
	}
	root := repoRoot(t)
	scratch := t.TempDir()
	copySources(t, root, scratch)
	bpf2go := buildBpf2go(t, scratch)
	for _, d := range directives(t, root) {
		run(t, d, scratch, bpf2go)
	}
	for _, d := range directives(t, root) {
		compareOutputs(t, root, scratch, d.dir)
	}
}

// directives lists the //go:generate lines that build BPF (bpf2go, or a
// shell line that runs clang) in the repository's Go files.
func directives(t *testing.T, root string) []directive {
	t.Helper()
	var ds []directive
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "bin" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		found, err := fileDirectives(root, path)
		ds = append(ds, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func fileDirectives(root, path string) ([]directive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rel, _ := filepath.Rel(root, path)
	var ds []directive
	pkg := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if name, ok := strings.CutPrefix(text, "package "); ok && pkg == "" {
			pkg = strings.Fields(name)[0]
		}
		cmd, ok := strings.CutPrefix(text, "//go:generate ")
		if !ok || !(strings.HasPrefix(cmd, bpf2goRun) || strings.Contains(cmd, "clang")) {
			continue
		}
		args, err := splitGenerate(cmd)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", rel, n, err)
		}
		ds = append(ds, directive{dir: filepath.Dir(rel), file: filepath.Base(rel), pkg: pkg, args: args, line: n})
	}
	return ds, sc.Err()
}

// splitGenerate splits a generate line as go generate does: on spaces,
// with double-quoted Go strings as one word.
func splitGenerate(line string) ([]string, error) {
	var words []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] != '"' {
			word, rest, _ := strings.Cut(line, " ")
			words, line = append(words, word), rest
			continue
		}
		end := 1
		for end < len(line) && (line[end] != '"' || line[end-1] == '\\') {
			end++
		}
		if end == len(line) {
			return nil, fmt.Errorf("unterminated quoted string")
		}
		word, err := strconv.Unquote(line[:end+1])
		if err != nil {
			return nil, err
		}
		words, line = append(words, word), line[end+1:]
	}
	return words, nil
}

// copySources copies every C source and header under internal/ (no
// generated file) to scratch, keeping the paths.
func copySources(t *testing.T, root, scratch string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !(strings.HasSuffix(path, ".c") || strings.HasSuffix(path, ".h")) {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(scratch, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(scratch, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// buildBpf2go builds the module's bpf2go (the version go.mod pins), as
// `go run` in a generate line would; go test puts its own go first in PATH.
func buildBpf2go(t *testing.T, scratch string) string {
	t.Helper()
	bin := filepath.Join(scratch, "bpf2go")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/cilium/ebpf/cmd/bpf2go")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building bpf2go: %v\n%s", err, out)
	}
	return bin
}

// run executes directive d in its folder of the scratch copy.
func run(t *testing.T, d directive, scratch, bpf2go string) {
	t.Helper()
	args := d.args
	if strings.HasPrefix(strings.Join(args, " ")+" ", bpf2goRun) {
		args = append([]string{bpf2go}, args[3:]...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = filepath.Join(scratch, d.dir)
	cmd.Env = append(os.Environ(), "GOPACKAGE="+d.pkg, "GOFILE="+d.file, "GOARCH=amd64", "DOLLAR=$")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", d, err, out)
	}
}

// compareOutputs compares every committed generated file of dir (objects,
// also under testdata, and bpf2go's Go files) with the scratch rebuild.
func compareOutputs(t *testing.T, root, scratch, dir string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !(strings.HasSuffix(path, ".o") || strings.HasSuffix(path, "_bpfel.go")) {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		committed, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rebuilt, err := os.ReadFile(filepath.Join(scratch, rel))
		switch {
		case err != nil:
			t.Errorf("%s: not rebuilt by any generate line: %v", rel, err)
		case !bytes.Equal(committed, rebuilt):
			t.Errorf("%s: committed bytes differ from a rebuild of its sources (%d vs %d bytes): run `make generate` and commit",
				rel, len(committed), len(rebuilt))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
