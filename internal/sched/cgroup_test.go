// cgroup_test.go: cpu.idle is detected from a cgroup the cpu controller is
// enabled in, never from cpu.stat, which every cgroup has (a kernel
// without cpu.idle must get the lowest weight instead).
package sched

import (
	"os"
	"path/filepath"
	"testing"
)

func TestV2IdleDetection(t *testing.T) {
	root := t.TempDir()
	touch := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a 5.10 tree: cpu.stat everywhere, cpu.weight in children, no cpu.idle
	touch(filepath.Join(root, "cpu.stat"))
	touch(filepath.Join(root, "cgroup.controllers"))
	touch(filepath.Join(root, "system.slice", "cpu.stat"))
	touch(filepath.Join(root, "system.slice", "cpu.weight"))
	if v2HasIdle(root) {
		t.Fatal("cpu.idle reported on a tree that has none")
	}
	touch(filepath.Join(root, "system.slice", "cpu.idle"))
	if !v2HasIdle(root) {
		t.Fatal("cpu.idle not found where it is")
	}
}
