// promcheck.go: PromCheck, the test helper that lints a metrics exposition the way
// Prometheus does (promlint, the library promtool uses, always; and
// `promtool check metrics` itself when it is installed).
package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// PromtoolFallback is where scripts/deps.sh puts promtool, taken out of
// Debian's prometheus package without installing a Prometheus server.
const PromtoolFallback = "/usr/local/lib/lanes-tools/promtool"

// PromCheck fails t if text does not pass Prometheus' metrics linter.
func PromCheck(t testing.TB, text []byte) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	path, err := exec.LookPath("promtool")
	if err != nil {
		path = PromtoolFallback
		if _, err := os.Stat(path); err != nil {
			t.Log("promtool not installed (scripts/deps.sh test fetches it): promlint only")
			return
		}
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
