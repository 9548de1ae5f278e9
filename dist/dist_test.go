// dist_test.go: `make deb` builds a package holding the binary, the hardened
// unit, the policy as a conffile, man pages (lanes-policy(5) too),
// completions, the traces, the example policies and the realtime lane's
// C header with its pkg-config file, with Depends computed,
// a Debian changelog, a DEP-5 copyright file and md5sums; lintian finds no
// error or warning that dist/debian/lintian-overrides does not justify; the
// unpacked binary runs and checks the shipped and example policies; the
// unit passes `systemd-analyze verify` and its exposure is at most 5.
package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/pmqos"
)

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestDebianPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package (a minute or more)")
	}
	for _, c := range []string{"make", "dpkg-deb", "gzip"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not installed", c)
		}
	}
	out := t.TempDir()
	// a developer's build in OUT, which make deb rebuilt with the Debian version
	mine := filepath.Join(out, "lanes")
	const built = "#!/bin/sh\necho the developer's own build\n"
	if err := os.WriteFile(mine, []byte(built), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "..", nil, "make", "--no-print-directory", "deb", "OUT="+out)
	if b, err := os.ReadFile(mine); err != nil || string(b) != built {
		t.Errorf("make deb replaced the build in OUT (%s): %v", mine, err)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "lanes_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one package in %s, have %v", out, debs)
	}
	checkPackageContents(t, debs[0], out)
	checkControl(t, debs[0], out)
	t.Run("lintian", func(t *testing.T) { checkLintian(t, debs[0]) })
	root, unit := checkUnpacked(t, debs[0], out)
	checkRTDev(t, root)
	verifyUnit(t, out, root, unit)
}

// checkControl: Depends names glibc (lanes-rtd links it) as dpkg-shlibdeps
// computes it; the maintainer scripts parse; the changelog and copyright
// are Debian's formats.
func checkControl(t *testing.T, deb, out string) {
	t.Helper()
	if dep := run(t, "", nil, "dpkg-deb", "-f", deb, "Depends"); !regexp.MustCompile(`^libc6 \(>= [0-9.]+\)`).MatchString(dep) {
		t.Errorf("Depends: %q, want libc6 (>= VERSION) from dpkg-shlibdeps", dep)
	}
	ctrl := filepath.Join(out, "control")
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		run(t, "", nil, "sh", "-n", filepath.Join(ctrl, script))
	}
	if b, err := os.ReadFile(filepath.Join(ctrl, "md5sums")); err != nil || !strings.Contains(string(b), "  usr/bin/lanes\n") {
		t.Errorf("md5sums: %v\n%s", err, b)
	}
	x := filepath.Join(out, "x")
	run(t, "", nil, "dpkg-deb", "-x", deb, x)
	doc := filepath.Join(x, "usr/share/doc/lanes")
	version := strings.TrimSpace(run(t, "", nil, "dpkg-deb", "-f", deb, "Version"))
	if cl := run(t, "", nil, "dpkg-parsechangelog", "-l", filepath.Join(doc, "changelog.Debian.gz"), "-S", "Version"); strings.TrimSpace(cl) != version {
		t.Errorf("changelog.Debian.gz: version %q, package %q", cl, version)
	}
	if b, _ := os.ReadFile(filepath.Join(doc, "copyright")); !strings.HasPrefix(string(b), "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Errorf("copyright is not DEP-5:\n%.200s", b)
	}
}

// checkLintian runs lintian on the package: no error and no warning that
// the package's overrides (each with its reason) do not cover.
func checkLintian(t *testing.T, deb string) {
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Skip("lintian not installed (scripts/deps.sh test installs it)")
	}
	cmd := exec.Command("lintian", "--pedantic", "--display-info", "--show-overrides", deb)
	// lintian leaves its ELF cache (mldbm-elf-*) in TMPDIR: one of the test's own
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("lintian --pedantic --display-info --show-overrides:\n%s", out)
	if ee, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("lintian: %v", err)
	} else if ok && ee.ExitCode() != 1 && ee.ExitCode() != 2 {
		t.Fatalf("lintian: %v", err) // 1 and 2: tags found, reported below
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") {
			t.Errorf("lintian: %s (fix it, or justify it in dist/debian/lintian-overrides)", line)
		}
	}
}

// checkPackageContents checks the package's file list (every file lanes
// installs, no path of the machine that built it) and its control data.
func checkPackageContents(t *testing.T, deb, out string) {
	t.Helper()
	list := run(t, "", nil, "dpkg-deb", "-c", deb)
	for _, want := range []string{"./usr/bin/lanes", "./usr/libexec/lanes/lanes-rtd", "./lib/systemd/system/lanes.service", "./etc/lanes/policy.yaml",
		"./usr/share/man/man1/lanes.1.gz", "./usr/share/man/man1/lanes-daemon.1.gz", "./usr/share/man/man1/lanes-move.1.gz",
		"./usr/share/bash-completion/completions/lanes", "./usr/share/zsh/vendor-completions/_lanes",
		"./usr/share/fish/vendor_completions.d/lanes.fish", "./usr/share/lanes/traces/TMobile-UMTS-driving.up",
		"./usr/share/lanes/traces/COPYING", "./usr/share/doc/lanes/copyright", "./usr/share/doc/lanes/changelog.Debian.gz",
		"./usr/share/man/man5/lanes-policy.5.gz", "./usr/share/lintian/overrides/lanes",
		"./usr/share/doc/lanes/examples/laptop.yaml", "./usr/share/doc/lanes/examples/home-server.yaml",
		"./usr/share/doc/lanes/examples/robot.yaml"} {
		if !strings.Contains(list, " "+want+"\n") {
			t.Errorf("package lacks %s", want)
		}
	}
	// No path of the machine that built it: the checkout or the temp folder.
	checkout, _ := filepath.Abs("..")
	for _, p := range []string{checkout, os.TempDir()} {
		if strings.Contains(list, strings.TrimPrefix(p, "/")+"/") {
			t.Errorf("package holds a build machine path (%s):\n%s", p, list)
		}
	}
	ctrl := filepath.Join(out, "control")
	run(t, "", nil, "dpkg-deb", "-e", deb, ctrl)
	if b, _ := os.ReadFile(filepath.Join(ctrl, "conffiles")); strings.TrimSpace(string(b)) != "/etc/lanes/policy.yaml" {
		t.Errorf("conffiles: %q", b)
	}
	if f := run(t, "", nil, "dpkg-deb", "-f", deb, "Package", "Architecture"); !strings.Contains(f, "Package: lanes") {
		t.Errorf("control: %s", f)
	}
}

// checkRTDev: the unpacked lanes-rt.pc points C builds at the unpacked
// lanes_rt.h (pkg-config run with the root as its sysroot).
func checkRTDev(t *testing.T, root string) {
	t.Helper()
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Log("pkg-config not installed: lanes-rt.pc not read")
		return
	}
	env := []string{"PKG_CONFIG_LIBDIR=" + filepath.Join(root, "usr/share/pkgconfig"), "PKG_CONFIG_PATH=",
		"PKG_CONFIG_SYSROOT_DIR=" + root, "PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1"}
	cflags := strings.TrimSpace(run(t, "", env, "pkg-config", "--cflags", "lanes-rt"))
	if cflags != "-I"+filepath.Join(root, "usr/include") {
		t.Errorf("pkg-config --cflags lanes-rt: %q, want -I%s", cflags, filepath.Join(root, "usr/include"))
	}
	if _, err := os.Stat(filepath.Join(root, "usr/include/lanes_rt.h")); err != nil {
		t.Error(err)
	}
}

// checkUnpacked unpacks the package into a scratch root, runs what was
// unpacked and checks the systemd unit's hardening lines. It returns the
// root and the unit's text.
func checkUnpacked(t *testing.T, deb, out string) (root, unit string) {
	t.Helper()
	root = filepath.Join(out, "root")
	run(t, "", nil, "dpkg-deb", "-x", deb, root)
	bin := filepath.Join(root, "usr/bin/lanes")
	if v := run(t, "", nil, bin, "--version"); !strings.HasPrefix(v, "lanes ") {
		t.Errorf("--version: %q", v)
	}
	if os.Geteuid() == 0 { // the daemon accepts only a root-owned policy
		run(t, "", nil, bin, "daemon", "--check", "--policy", filepath.Join(root, "etc/lanes/policy.yaml"))
		examples, _ := filepath.Glob(filepath.Join(root, "usr/share/doc/lanes/examples/*.yaml"))
		for _, p := range examples {
			run(t, "", nil, bin, "daemon", "--check", "--policy", p)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/lanes.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "Delegate=yes", "CapabilityBoundingSet=", "ProtectSystem=strict",
		"StateDirectory=lanes", "ExecStart=/usr/bin/lanes daemon --policy /etc/lanes/policy.yaml"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	checkReload(t, string(b))
	checkDevices(t, string(b))
	return root, string(b)
}

// checkDevices: PrivateDevices=yes gives the service a /dev of its own with
// null, zero, the random devices and ttys; every other device the daemon
// opens must be bound in and allowed, or it is missing under systemd alone
// (the realtime lane's pm_latency_us: "open /dev/cpu_dma_latency: no such
// file or directory").
func checkDevices(t *testing.T, unit string) {
	t.Helper()
	if !strings.Contains(unit, "\nPrivateDevices=yes\n") {
		return
	}
	for _, dev := range []string{pmqos.Path} {
		if !regexp.MustCompile(`(?m)^BindPaths=(.* )?-?`+regexp.QuoteMeta(dev)+`( |$)`).MatchString(unit) ||
			!regexp.MustCompile(`(?m)^DeviceAllow=`+regexp.QuoteMeta(dev)+` rw?$`).MatchString(unit) {
			t.Errorf("unit: PrivateDevices=yes without BindPaths= and DeviceAllow= for %s", dev)
		}
	}
}

// checkReload: `systemctl reload` checks the policy before the daemon is
// signalled, so that a broken policy fails the reload (the daemon alone
// would keep the running policy while systemd reported success).
func checkReload(t *testing.T, unit string) {
	t.Helper()
	check := strings.Index(unit, "ExecReload=/usr/bin/lanes daemon --check --policy /etc/lanes/policy.yaml\n")
	hup := strings.Index(unit, "ExecReload=/bin/kill -HUP $MAINPID\n")
	if check < 0 || hup < check {
		t.Errorf("unit: want ExecReload= running lanes daemon --check before kill -HUP\n%s", unit)
	}
}

// verifyUnit runs systemd-analyze verify and security on the unit, its
// commands and man pages pointed at the unpacked ones.
func verifyUnit(t *testing.T, out, root, unit string) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed: unit not verified")
	}
	local := filepath.Join(out, "lanes.service")
	bin := filepath.Join(root, "usr/bin/lanes")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(unit, "/usr/bin/lanes", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "verify", local)
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr/share/man"))
	vout, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(vout), "\n") {
		if strings.Contains(line, "lanes.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, vout)
	}
	sec, _ := exec.Command("systemd-analyze", "security", "--offline=yes", local).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for lanes.service: ([0-9.]+)`).FindSubmatch(sec)
	if m == nil {
		t.Fatalf("systemd-analyze security: no exposure level\n%s", sec)
	}
	exposure, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security exposure: %.1f", exposure)
	if exposure > 5 {
		t.Errorf("exposure %.1f, want at most 5\n%s", exposure, sec)
	}
}
