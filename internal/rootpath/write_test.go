// write_test.go: root's state files written and read without following
// links.
package rootpath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A link at the target is replaced, its target untouched; a link is not
// read; a file over the bound is refused.
func TestWriteFileReplacesLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own the files")
	}
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path, 1<<10); err == nil {
		t.Error("ReadFile followed a link")
	}
	if err := WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root's" {
		t.Errorf("victim written through the link: %q", b)
	}
	b, err := ReadFile(path, 1<<10)
	if err != nil || string(b) != "{}" {
		t.Errorf("read back %q, %v", b, err)
	}
	if fi, _ := os.Lstat(path); fi.Mode()&os.ModeSymlink != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("state file mode %v", fi.Mode())
	}
	if _, err := ReadFile(path, 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the bound: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("{}"), 0o644); err == nil {
		t.Error("wrote into a directory others can change")
	}
}
