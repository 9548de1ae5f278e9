// version.go: `lanes version` and `lanes --version`, the build's version string.
package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is set at link time: -ldflags "-X main.version=..."
var version = "dev"

func init() {
	register(&command{path: "version", summary: "print the version (same as --version)",
		setup: func(_ *pflag.FlagSet, e *env) runFunc {
			return func(context.Context, []string) error {
				fmt.Fprintln(e.stdout, versionString())
				return nil
			}
		}})
}

func versionString() string {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	return fmt.Sprintf("lanes %s%s %s/%s %s", version, rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
