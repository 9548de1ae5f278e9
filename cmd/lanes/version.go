// version.go: `lanes version`, the build's version string.
package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time: -ldflags "-X main.version=..."
var version = "dev"

func init() {
	register(&command{name: "version", summary: "print the version", run: func(_ context.Context, e *env, _ []string) error {
		rev := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = " " + s.Value
				}
			}
		}
		fmt.Fprintf(e.stdout, "lanes %s%s %s/%s %s\n", version, rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
		return nil
	}})
}
