// reset.go: `lanes reset`, remove what a killed daemon left behind.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/daemon"
)

func init() {
	register(&command{path: "reset", summary: "remove what a killed daemon left in this network namespace (qdiscs, classifier, cgroups, socket)",
		setup: func(fs *pflag.FlagSet, e *env) runFunc {
			sock := socketFlag(fs, e)
			rt := fs.String("realtime-socket", config.DefaultRealtimeSocket, "the realtime lane's socket (the policy's realtime.socket)")
			return func(context.Context, []string) error {
				done, err := daemon.Reset(*sock, *rt, daemon.StateDir())
				for _, d := range done {
					fmt.Fprintln(e.stdout, d)
				}
				return err
			}
		}})
}
