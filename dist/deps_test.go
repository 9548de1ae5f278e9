// deps_test.go: scripts/deps.sh waits for apt's locks instead of failing,
// as a freshly booted Debian running unattended-upgrades needs: an
// `apt-get update` refused for /var/lib/apt/lists/lock is tried again
// until it goes through, and the install asks apt to wait for dpkg's locks
// (DPkg::Lock::Timeout). apt-get and dpkg-query are stand-ins on PATH here
// (holding the machine's real apt lock would stall everyone's apt); the
// script is the real one.
package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeAptGet fails `update` for the lists lock until it has been called
// busyFor times, logs every call and installs nothing.
const fakeAptGet = `#!/bin/sh
echo "apt-get $*" >> "$FAKE_APT/log"
case " $* " in
*" update "*)
  n=$(cat "$FAKE_APT/updates" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$FAKE_APT/updates"
  if [ $n -le "$FAKE_APT_BUSY" ]; then
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
    exit 100
  fi ;;
esac
exit 0
`

// fakeDpkgQuery says no package is installed.
const fakeDpkgQuery = "#!/bin/sh\nexit 1\n"

func TestDepsWaitForAptLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("deps.sh installs only as root")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"apt-get": fakeAptGet, "dpkg-query": fakeDpkgQuery} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("../scripts/deps.sh", "build")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_APT="+dir, "FAKE_APT_BUSY=2")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("deps.sh build with apt busy twice: %v\n%s", err, out)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	calls := strings.Split(strings.TrimSpace(string(log)), "\n")
	updates, installs := 0, []string{}
	for _, c := range calls {
		switch {
		case strings.Contains(c, " update"):
			updates++
		case strings.Contains(c, " install "):
			installs = append(installs, c)
		}
	}
	if updates != 3 || len(installs) != 1 {
		t.Fatalf("apt-get calls %q: want update refused twice then run, then one install", calls)
	}
	for _, want := range []string{"DPkg::Lock::Timeout=600", " gcc ", " libc6-dev"} {
		if !strings.Contains(installs[0]+" ", want) {
			t.Errorf("install %q lacks %q", installs[0], want)
		}
	}
	if !strings.Contains(string(out), "apt is busy") {
		t.Errorf("deps.sh did not say it waits for apt:\n%s", out)
	}
	t.Logf("deps.sh build, apt's lists lock busy for 2 tries: went through after %v\n%s", took.Round(time.Second), out)
}
