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

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/daemon"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/policy"
)

func init() {
	register(&command{path: "daemon", summary: "run the lanes daemon (datapath, policy, API); SIGHUP reloads the policy",
		setup: daemonCmd})
}

func daemonCmd(fs *pflag.FlagSet, e *env) runFunc {
	pol := fs.String("policy", "", "policy file (default: the embedded default policy)")
	sock := fs.String("socket", api.DefaultSocket, "API socket path")
	check := fs.Bool("check", false, "only validate the policy file and exit")
	printDefault := fs.Bool("print-default-policy", false, "print the embedded default policy and exit")
	allowForeign := fs.Bool("allow-non-root-policy", false, "accept a policy file not owned by root (testing only)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	without := fs.StringSlice("without", nil, "leave optional datapath capabilities off as if the kernel lacked them (sock_ops, cap_cc, background_cc, background_clamp: LEDBAT++'s window as a cwnd clamp where background_cc is off, rledbat; rledbat_daemon: the daemon's own rLEDBAT, which runs where rledbat is off)")
	pinnedRoot := fs.String("pinned-bpf", "", "run on the classifier Android's loader pinned under this bpffs (/sys/fs/bpf: the OEM path, docs/android.md) instead of loading lanes' own")
	androidCpuset := fs.String("android-cpuset", "/dev/cpuset", "where Android's cpuset groups (top-app, foreground, background...) are, for the policy's android: rules")
	pinnedPrefix := fs.String("pinned-prefix", "tethering/", "the pinned objects' location prefix under --pinned-bpf")
	byUpdate := fs.Bool("struct-ops-by-update", false, "register the BPF congestion controls by map update, as on kernels before 6.4 (they outlive a killed daemon until its restart or lanes reset; testing)")
	keepTokens := fs.Bool("bg-udp-keep-tokens", false, "a decrease of the background QUIC/UDP class's rate leaves its policer's bucket as it is (the lab pairs the rule with what it replaced)")
	udpOff := fs.StringSlice("bg-udp-rule-off", nil, "leave parts of the background QUIC/UDP class's rule off (slope: its decrease beside a foreground at the share target's slope; arrivals: its arrivals held at the yield's rate beside any present foreground; shape: its egress policed, not shaped; all; the lab pairs the rule with what it replaced)")
	untoldHeld := fs.Bool("untold-held", false, "hold background at the minimum beside a present foreground no TCP RTT sample speaks for (a call: UDP), and leave foreground UDP arrivals out of its presence, instead of sharing there by the background's own queuing delay (the lab pairs the rule with what it replaced)")
	shareOff := fs.StringSlice("share-rule-off", nil, "leave parts of the share rule beside a present foreground off (slope, defer, grow, download, all; the lab pairs the rule with what it replaced)")
	return func(ctx context.Context, _ []string) error {
		off, err := datapath.ParseShareParts(*shareOff)
		if err != nil {
			return usageErrorf("--share-rule-off: %v", err)
		}
		udpParts, err := bgudp.ParseRuleParts(*udpOff)
		if err != nil {
			return usageErrorf("--bg-udp-rule-off: %v", err)
		}
		if *printDefault {
			_, err := e.stdout.Write(policy.DefaultYAML())
			return err
		}
		if *check {
			p := policy.Default()
			if *pol != "" {
				var err error
				if p, err = policy.Load(*pol, !*allowForeign); err != nil {
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
			// (a Wi-Fi policy checked before Wi-Fi is up, a package's check)
			for _, err := range config.Each(errors.Join(daemon.CheckInterfaces(p), p.MissingExecutables())) {
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
		return daemon.Run(ctx, daemon.Options{PolicyPath: *pol, Socket: *sock, RootOwnedPolicy: !*allowForeign,
			Version: version, Log: log, Without: *without, StructOpsByUpdate: *byUpdate, ShareOff: off, BgUDPKeepTokens: *keepTokens,
			BgUDPOff: udpParts, UntoldHeld: *untoldHeld, PinnedBPF: *pinnedRoot, PinnedPrefix: *pinnedPrefix,
			AndroidCpuset: *androidCpuset})
	}
}

// checkAgainstRunning refuses a policy that changes a key the daemon
// running on sock applies only at a restart (its reload would refuse it);
// without a daemon there, nothing to compare.
func checkAgainstRunning(sock string, p *policy.Policy) error {
	c, err := api.Dial(sock)
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
