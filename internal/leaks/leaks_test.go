// Tests of the leak check's baseline: what an earlier killed run left is
// not counted against the next.
package leaks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	before := []string{"netns lt1", "file /run/lanes/x"}
	now := []string{"file /run/lanes/x", "netns lt2", "netns lt1"}
	old, added := Split(now, before)
	if want := []string{"file /run/lanes/x", "netns lt1"}; !reflect.DeepEqual(old, want) {
		t.Errorf("old = %q, want %q", old, want)
	}
	if want := []string{"netns lt2"}; !reflect.DeepEqual(added, want) {
		t.Errorf("added = %q, want %q", added, want)
	}
	if _, added := Split(now, nil); len(added) != 3 {
		t.Errorf("without a baseline every leftover counts, got %q", added)
	}
}

func TestTempFiles(t *testing.T) {
	dir := t.TempDir()
	if left := TempFiles(dir); len(left) != 0 {
		t.Errorf("an empty directory lists %q", left)
	}
	if err := os.Mkdir(filepath.Join(dir, "org.chromium.Chromium.x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if left := TempFiles(dir); len(left) != 1 || !strings.Contains(left[0], "org.chromium.Chromium.x") {
		t.Errorf("TempFiles = %q, want the one directory", left)
	}
	if left := TempFiles(filepath.Join(dir, "missing")); len(left) != 1 {
		t.Errorf("a missing directory must be reported, got %q", left)
	}
}
