// traces_test.go: the lookup order and the error for a missing trace.
package traces

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckoutHasTheTraces(t *testing.T) {
	t.Setenv(EnvVar, "")
	for _, n := range []string{"TMobile-UMTS-driving.up", "TMobile-UMTS-driving.down", "TMobile-LTE-short.up", "Verizon-LTE-short.down"} {
		p, err := Path(n)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(filepath.Dir(p)) != "traces" {
			t.Errorf("%s resolved to %s, want the checkout's traces/", n, p)
		}
	}
}

func TestEnvFirst(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "TMobile-UMTS-driving.up"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVar, dir)
	p, err := Path("TMobile-UMTS-driving.up")
	if err != nil || p != filepath.Join(dir, "TMobile-UMTS-driving.up") {
		t.Fatalf("Path = %q, %v; want the file in $%s", p, err, EnvVar)
	}
	if d, _ := Dir(); d != dir {
		t.Errorf("Dir = %q, want %q", d, dir)
	}
	// A name missing from $LANES_TRACES is still found further down the order.
	if _, err := Path("Verizon-LTE-short.up"); err != nil {
		t.Error(err)
	}
}

func TestMissingIsAnError(t *testing.T) {
	for _, n := range []string{"no-such-trace.up", "/nonexistent/TMobile-UMTS-driving.up", ""} {
		if p, err := Path(n); err == nil {
			t.Errorf("Path(%q) = %q, want an error", n, p)
		}
	}
}
