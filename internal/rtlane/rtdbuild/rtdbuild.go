// Package rtdbuild compiles lanes-rtd (rtd/ in the source tree) for tests,
// with the system's C compiler and make's flags, so that the tests run the
// data path process as make builds it.
package rtdbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Name is the executable's name (rtlane.HelperName).
const Name = "lanes-rtd"

// Build compiles lanes-rtd into dir and returns its path.
func Build(dir string) (string, error) {
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("lanes-rtd: no source location")
	}
	root := filepath.Join(filepath.Dir(here), "..", "..", "..")
	src, _ := filepath.Glob(filepath.Join(root, "rtd", "*.c"))
	if len(src) == 0 {
		return "", fmt.Errorf("lanes-rtd: no sources under %s", filepath.Join(root, "rtd"))
	}
	out := filepath.Join(dir, Name)
	args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-std=gnu11", "-fwrapv",
		"-I" + filepath.Join(root, "internal", "bpf", "edfqdisc"), "-I" + filepath.Join(root, "include"), "-o", out}, src...)
	if b, err := exec.Command(CC(), args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("lanes-rtd: %s: %v: %s", CC(), err, b)
	}
	return out, nil
}

// FuzzDefines shrink lanes-rtd's tables in the fuzz target and the core's
// tests, so that inputs reach their limits (full, displaced, shared).
var FuzzDefines = []string{"-DEDF_CAP=512", "-DUSERS_MAX=256", "-DROUTES_MAX=64", "-DROUTE_BUCKETS=64",
	"-DFLOWS_MAX=128", "-DFLOW_BUCKETS=64"}

// BuildWith compiles the program of the C file main (a path under rtd/)
// with every source of lanes-rtd but main.c, by the compiler cc with
// extra flags, into dir; it returns its path.
func BuildWith(dir, cc, main string, extra ...string) (string, error) {
	rtd := RtdDir()
	src, _ := filepath.Glob(filepath.Join(rtd, "*.c"))
	var lib []string
	for _, f := range src {
		if filepath.Base(f) != "main.c" {
			lib = append(lib, f)
		}
	}
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(main), ".c"))
	args := []string{"-g", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-std=gnu11",
		"-I" + rtd, "-I" + filepath.Join(rtd, "..", "include"), "-I" + filepath.Join(rtd, "..", "internal", "bpf", "edfqdisc")}
	args = append(append(append(args, FuzzDefines...), extra...), "-o", out, filepath.Join(rtd, main))
	if b, err := exec.Command(cc, append(args, lib...)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %s: %v: %s", main, cc, err, b)
	}
	return out, nil
}

// CC is the C compiler: $CC, else cc.
func CC() string {
	if c := os.Getenv("CC"); c != "" {
		return c
	}
	return "cc"
}

// RtdDir is the folder of rtd/'s sources (for tests that compile against
// its headers).
func RtdDir() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "rtd")
}
