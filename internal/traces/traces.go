// Package traces finds the cellular link traces (mahimahi format) that lanes
// ships as data: in $LANES_TRACES, the installed share folder, or the
// traces/ folder of a source checkout, in that order.
package traces

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvVar names a folder searched before every other.
const EnvVar = "LANES_TRACES"

// marker is a file every traces folder holds; it tells a checkout's traces/
// folder from an unrelated one.
const marker = "README.md"

// Dirs lists the folders searched, in order, whether or not they exist.
func Dirs() []string {
	var dirs []string
	if d := os.Getenv(EnvVar); d != "" {
		dirs = append(dirs, d)
	}
	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		exeDir = filepath.Dir(exe)
		// <prefix>/bin/lanes -> <prefix>/share/lanes/traces (make install, the .deb).
		dirs = append(dirs, filepath.Join(exeDir, "..", "share", "lanes", "traces"))
	}
	for _, start := range []string{cwd(), exeDir} {
		if d := checkoutTraces(start); d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func cwd() string {
	d, _ := os.Getwd()
	return d
}

// checkoutTraces walks up from start to the first folder holding go.mod and
// traces/README.md: the traces of a source checkout.
func checkoutTraces(start string) string {
	for d := start; d != "" && d != "/" && d != "."; d = filepath.Dir(d) {
		t := filepath.Join(d, "traces")
		if exists(filepath.Join(d, "go.mod")) && exists(filepath.Join(t, marker)) {
			return t
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Dir is the first existing traces folder.
func Dir() (string, error) {
	dirs := Dirs()
	for _, d := range dirs {
		if exists(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no traces folder found (searched %s; set %s)", strings.Join(dirs, ", "), EnvVar)
}

// Path resolves a trace: a name (no '/') is looked up in Dirs() in order, a
// path is used as is. A trace that does not exist is an error.
func Path(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty trace name")
	}
	if strings.ContainsRune(name, '/') {
		if !exists(name) {
			return "", fmt.Errorf("trace %s: no such file", name)
		}
		return name, nil
	}
	dirs := Dirs()
	for _, d := range dirs {
		if p := filepath.Join(d, name); exists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("trace %q not found (searched %s; set %s or give a path)", name, strings.Join(dirs, ", "), EnvVar)
}
