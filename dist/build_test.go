// build_test.go: `make build` builds this machine's binaries only: no arm64
// or Android build, no cross compiler among the Debian packages it
// installs (scripts/deps.sh build), as a native-only user expects; the
// cross builds are `make cross`.
package dist

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func TestMakeBuildNativeOnly(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	out := t.TempDir()
	dry, err := exec.Command("make", "-C", "..", "--no-print-directory", "-n", "build", "OUT="+out).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, dry)
	}
	cross := regexp.MustCompile(`arm64|aarch64|GOARCH=|GOOS=|deps\.sh (cross|vm)`)
	deps := 0
	for _, line := range strings.Split(string(dry), "\n") {
		if cross.MatchString(line) {
			t.Errorf("make build runs a cross build: %s", line)
		}
		if strings.Contains(line, "deps.sh") {
			deps++
			if !strings.HasSuffix(strings.TrimSpace(line), "deps.sh build") {
				t.Errorf("make build installs another target's packages: %s", line)
			}
		}
	}
	if deps != 1 || !strings.Contains(string(dry), out+"/lanes ") || !strings.Contains(string(dry), out+"/lanes-rtd ") {
		t.Errorf("make -n build: want deps.sh build once, bin/lanes and bin/lanes-rtd:\n%s", dry)
	}
	// What deps.sh build installs: the C compiler for lanes-rtd, no cross one.
	script, err := os.ReadFile("../scripts/deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*build\) want\+=\(([^)]*)\)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/deps.sh has no build) case")
	}
	if pkgs := string(m[1]); cross.MatchString(pkgs) || !strings.Contains(pkgs, "gcc") {
		t.Errorf("deps.sh build installs %q: want the native C compiler only", pkgs)
	}
	t.Logf("make -n build:\n%s", dry)
}
