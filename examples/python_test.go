// python_test.go: the Python client (clients/python) installed as a user
// installs it, with pip into a fresh virtual environment, and its example
// application rt_echo.py run against a realtime lane with lanes-rtd in a
// fresh namespace, as TestRTEcho runs rt-echo; then run as an ungranted
// user (nobody), whose attach must be refused as not-granted.
package examples_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// installPython makes a virtual environment in a scratch folder readable
// by nobody and pip-installs a copy of clients/python into it (a copy: the
// build leaves build/ and *.egg-info beside the sources). It returns the
// environment's python and the copy's example.
func installPython(t *testing.T) (python, example string) {
	t.Helper()
	// Debian's python3, whose setuptools and wheel scripts/deps.sh
	// installs (not whatever python3 comes first on PATH).
	py := "/usr/bin/python3"
	if _, err := exec.LookPath(py); err != nil {
		t.Skip("no /usr/bin/python3 (Debian: python3)")
	}
	dir := publicDir(t)
	src := filepath.Join(dir, "src")
	if out, err := exec.Command("cp", "-r", "../clients/python", src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	venv := filepath.Join(dir, "venv")
	// --system-site-packages: the build backend is Debian's (setuptools,
	// wheel), so the install needs no network; the client still goes into
	// the environment.
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv (Debian: python3-venv): %v\n%s", err, out)
	}
	python = filepath.Join(venv, "bin", "python")
	pip := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(5*time.Minute))
		defer cancel()
		return exec.CommandContext(ctx, python, append([]string{"-m", "pip", "install", "--disable-pip-version-check", "-q"}, args...)...).CombinedOutput()
	}
	if out, err := pip("--no-index", "--no-build-isolation", src); err != nil {
		t.Fatalf("pip install clients/python offline (Debian: python3-setuptools, python3-wheel): %v\n%s", err, out)
	}
	out, err := exec.Command(python, "-c", "import lanes_rt; print(lanes_rt.__file__)").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), venv+"/") {
		t.Fatalf("lanes_rt imported from %q, want the environment %s: %v", out, venv, err)
	}
	return python, filepath.Join(src, "examples", "rt_echo.py")
}

func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs a package and runs traffic between namespaces")
	}
	testutil.RequireRoot(t)
	python, example := installPython(t)
	b := newBed(t, buildRTD(t))
	b.checkEchoApp(t, []string{python, example})

	b.checkNotGranted(t, []string{python, example})
	checkUnavailable(t, []string{python, example})
}
