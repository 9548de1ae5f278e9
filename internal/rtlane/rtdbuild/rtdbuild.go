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
