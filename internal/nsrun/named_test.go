// named_test.go: a namespace file mounted in a prepared directory stays
// removable after another tool makes the directory a mount point as
// `ip netns add` does; in an unprepared one it does not (the control).
package nsrun

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// iprouteMakeMountPoint is what `ip netns add` does to the directory
// before it mounts a namespace there: make it shared, bind-mounting it on
// itself first if it is not a mount point.
func iprouteMakeMountPoint(dir string) error {
	err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, "")
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, "")
}

// mountNetnsFile mounts this thread's network namespace on dir/name, as a
// named namespace is mounted.
func mountNetnsFile(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/thread-self/ns/net", p, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("mount %s: %v", p, err)
	}
	return p
}

// cleanupMounts removes everything mounted at or below dir, covered
// mounts included, as the test ends.
func cleanupMounts(t *testing.T, dir string) {
	t.Cleanup(func() {
		for i := 0; i < 10; i++ {
			busy, _ := hasMountsBelow(dir)
			err := unix.Unmount(dir, unix.MNT_DETACH)
			if !busy && err != nil {
				break
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				_ = unix.Unmount(filepath.Join(dir, e.Name()), unix.MNT_DETACH)
			}
		}
	})
}

func removeNamed(p string) error {
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
		return err
	}
	return os.Remove(p)
}

func TestPreparedNetnsDirSurvivesIprouteMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, prepared := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "netns")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cleanupMounts(t, dir)
		if prepared {
			if err := prepareNetnsDir(dir); err != nil {
				t.Fatalf("prepare: %v", err)
			}
		}
		p := mountNetnsFile(t, dir, "ns1")
		if err := iprouteMakeMountPoint(dir); err != nil {
			t.Fatalf("ip netns add's mount point: %v", err)
		}
		err := removeNamed(p)
		if prepared && err != nil {
			t.Errorf("prepared directory: removing the namespace after ip's mount point: %v", err)
		}
		if !prepared && err == nil {
			t.Errorf("unprepared directory: the namespace was removable: the control cannot show the fault")
		}
	}
}

func TestPrepareLeavesExistingMountsUncovered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := filepath.Join(t.TempDir(), "netns")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, dir)
	p := mountNetnsFile(t, dir, "other-tools")
	if err := prepareNetnsDir(dir); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := removeNamed(p); err != nil {
		t.Errorf("a namespace mounted before the preparation: %v", err)
	}
}
