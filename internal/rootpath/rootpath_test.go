// rootpath_test.go: who could have written a policy file.
package rootpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackWritablePolicy: the daemon's policy check rejected only
// world-writable files, so a `root:users 0664` file (or one in a
// group-writable directory) with a fifo task rule passed. Fix: nothing on
// the path may be writable by group or others, except sticky directories.
func TestAttackWritablePolicy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own the files")
	}
	base, err := os.MkdirTemp("", "lanes-rootpath") // under /tmp: 1777, sticky
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	good := filepath.Join(base, "good.yaml")
	os.WriteFile(good, nil, 0o644)
	if err := Check(good); err != nil {
		t.Fatalf("root's 0644 file in root's 0755 dir under sticky /tmp: %v", err)
	}
	groupFile := filepath.Join(base, "group.yaml")
	os.WriteFile(groupFile, nil, 0o644)
	os.Chmod(groupFile, 0o664)
	os.Chown(groupFile, 0, 100)
	if err := Check(groupFile); err == nil || !strings.Contains(err.Error(), "writable by group") {
		t.Errorf("root:users 0664 file: %v", err)
	}
	dir := filepath.Join(base, "groupdir")
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, 0o775)
	inDir := filepath.Join(dir, "p.yaml")
	os.WriteFile(inDir, nil, 0o644)
	if err := Check(inDir); err == nil || !strings.Contains(err.Error(), dir+" is writable") {
		t.Errorf("file in a group-writable directory: %v", err)
	}
	foreign := filepath.Join(base, "foreign.yaml")
	os.WriteFile(foreign, nil, 0o644)
	os.Chown(foreign, 65534, 65534)
	if err := Check(foreign); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("file owned by nobody: %v", err)
	}
	link := filepath.Join(base, "link.yaml")
	os.Symlink(inDir, link)
	if err := Check(link); err == nil {
		t.Error("symlink to a file in a group-writable directory passed")
	}
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o755)
	os.Chmod(sticky, os.ModeSticky|0o777)
	leaf := filepath.Join(sticky, "p.yaml")
	os.WriteFile(leaf, nil, 0o644)
	if err := Check(leaf); err != nil {
		t.Errorf("root's file in a sticky directory: %v", err)
	}
}
