// android_test.go: the OEM kit's SELinux fragment (dist/android/lanes.te)
// compiled with Android's public system/sepolicy at the commit
// scripts/android-sepolicy.sh pins, where that source is cached (the
// script's cache; `make android-sepolicy` fills it): the neverallow
// violations checkpolicy reports are exactly the platform's two
// reservations docs/android.md names (the Tethering APEX's pins belong to
// bpfloader and network_stack; BPF together with net_admin to netd,
// netutils_wrapper, network_stack and system_server), nothing else; the
// same rights granted to netd's domain (dist/android/netd-domain.te,
// which CTS refuses at run time) and the vendor route's fragment
// (dist/android/vendor-route.te, a route lanes does not implement) with
// none.
package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// platformReservations are the violations Android's platform policy
// makes unavoidable for a daemon of its own domain (docs/android.md).
var platformReservations = []string{
	"bpfdomain.te: lanes lanes:capability { net_admin }",
	"bpfloader.te: lanes fs_bpf_tethering:file { read }",
	"bpfloader.te: lanes fs_bpf_tethering:file { write }",
	"network_stack.te: lanes fs_bpf_tethering:dir { search }",
	"network_stack.te: lanes fs_bpf_tethering:file { read write }",
}

func sepolicyCached(t *testing.T) {
	out, err := exec.Command("sh", "-c", "sed -n 's/^COMMIT=//p' ../scripts/android-sepolicy.sh").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("LANES_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "lanes")
	}
	if _, err := os.Stat(filepath.Join(cache, "sepolicy-"+strings.TrimSpace(string(out)), "public")); err != nil {
		t.Skip("system/sepolicy not cached (make android-sepolicy SEPOLICY_SRC=...)")
	}
	for _, tool := range []string{"checkpolicy", "m4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s missing (apt-get install checkpolicy m4)", tool)
		}
	}
}

func TestAndroidSELinuxFragment(t *testing.T) {
	sepolicyCached(t)
	for _, c := range []struct {
		fragment string
		want     []string
	}{
		{"android/lanes.te", platformReservations},
		{"android/netd-domain.te", nil},
		{"android/vendor-route.te", nil},
	} {
		got, out := sepolicyViolations(t, c.fragment)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: neverallow violations:\n%s\nwant:\n%s", c.fragment,
				strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
		if strings.Contains(out, "ERROR") || !strings.Contains(out, "system/sepolicy at ") {
			t.Errorf("%s: not compiled", c.fragment)
		}
	}
}

// sepolicyViolations compiles fragment with scripts/android-sepolicy.sh:
// its neverallow violations ("<platform file>: <allow rule>", sorted) and
// the script's output.
func sepolicyViolations(t *testing.T, fragment string) ([]string, string) {
	out, _ := exec.Command("../scripts/android-sepolicy.sh", fragment).CombinedOutput()
	t.Logf("scripts/android-sepolicy.sh %s:\n%s", fragment, out)
	re := regexp.MustCompile(`neverallow on line \d+ of private/(\S+) .*violated by allow (.*);`)
	var got []string
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		got = append(got, m[1]+": "+m[2])
	}
	slices.Sort(got)
	return got, string(out)
}
