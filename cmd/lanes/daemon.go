// daemon.go: `lanes daemon`, the long-running service that installs lanes'
// datapath and serves the API (see internal/daemon).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/daemon"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/policy"
)

func init() {
	register(&command{path: "daemon", summary: "run the lanes daemon (datapath, policy, API); SIGHUP reloads the policy",
		setup: daemonCmd})
}

func daemonCmd(fs *pflag.FlagSet, e *env) runFunc {
	pol := fs.String("policy", "", "policy file (default: the embedded default policy)")
	sock := fs.String("socket", client.DefaultSocket, "API socket path")
	check := fs.Bool("check", false, "only validate the policy file and exit")
	printDefault := fs.Bool("print-default-policy", false, "print the embedded default policy and exit")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	without := fs.StringSlice("without", nil, daemon.WithoutHelp())
	pinnedRoot := fs.String("pinned-bpf", "", "run on the classifier Android's loader pinned under this bpffs (/sys/fs/bpf: the OEM path, docs/android.md) instead of loading lanes' own")
	androidCpuset := fs.String("android-cpuset", "/dev/cpuset", "where Android's cpuset groups (top-app, foreground, background...) are, for the policy's android: rules")
	pinnedPrefix := fs.String("pinned-prefix", "tethering/", "the pinned objects' location prefix under --pinned-bpf")
	experimentsOf := experiments.Flags(fs) // hidden: the lab and the tests
	return func(ctx context.Context, _ []string) error {
		ex, err := experimentsOf()
		if err != nil {
			return usageErrorf("%v", err)
		}
		if err := daemon.CheckWithout(*without); err != nil {
			return usageErrorf("%v", err)
		}
		if *printDefault {
			_, err := e.stdout.Write(policy.DefaultYAML())
			return err
		}
		if *check {
			p := policy.Default()
			if *pol != "" {
				var err error
				if p, err = policy.Load(*pol, !ex.NonRootPolicy); err != nil {
					return err
				}
			}
			if err := daemon.CheckCapacity(p); err != nil {
				return err
			}
			if err := checkAgainstRunning(*sock, p); err != nil {
				return err
			}
			// an interface that is not here yet is waited for, not an error
			// (a Wi-Fi policy checked before Wi-Fi is up, a package's check);
			// a grant any user can claim is the admin's call
			for _, err := range config.Each(errors.Join(daemon.CheckInterfaces(p), p.MissingExecutables(), p.FakeableGrants())) {
				fmt.Fprintf(e.stderr, "warning: %v\n", err)
			}
			e.stdout.Write([]byte("policy " + p.Source + ": ok\n"))
			return nil
		}
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			return usageErrorf("--log-level: %v", err)
		}
		var h slog.Handler = slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv})
		if toJournal(e.stderr) {
			h = newJournalHandler(e.stderr, &slog.HandlerOptions{Level: lv})
		}
		log := slog.New(h)
		if os.Geteuid() != 0 {
			log.Warn("not running as root: installing qdiscs and BPF programs will fail")
		}
		if on := ex.On(); on != "" {
			log.Info("experiments on: the lab's switches, not the product's rules", "flags", on)
		}
		return daemon.Run(ctx, daemon.Options{PolicyPath: *pol, Socket: *sock, StateDir: daemon.StateDir(), Version: version, Log: log,
			Without: *without, Experiments: ex, PinnedBPF: *pinnedRoot, PinnedPrefix: *pinnedPrefix,
			AndroidCpuset: *androidCpuset})
	}
}

// checkAgainstRunning refuses a policy that changes a key the daemon
// running on sock applies only at a restart (its reload would refuse it);
// without a daemon there, nothing to compare.
func checkAgainstRunning(sock string, p *policy.Policy) error {
	c, err := client.Dial(sock)
	if err != nil {
		return nil
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil || st.RestartKeys == nil {
		return nil
	}
	if err := policy.RestartChanges(st.RestartKeys, p); err != nil {
		return fmt.Errorf("the daemon on %s would refuse this policy at a reload:\n%w", sock, err)
	}
	return nil
}
