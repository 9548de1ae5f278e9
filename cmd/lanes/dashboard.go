// dashboard.go: `lanes dashboard`, the web dashboard (internal/dashboard):
// live cwnd / cap / srtt / rate of every TCP flow, the lanes' counters and
// the cooperative controller's state, and /metrics for Prometheus.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/dashboard"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

func init() {
	register(&command{path: "dashboard", summary: "web dashboard: live cwnd, caps and lanes; /metrics for Prometheus",
		setup: dashboardCmd})
}

func dashboardCmd(fs *pflag.FlagSet, e *env) runFunc {
	listen := fs.String("listen", "127.0.0.1:8377", "HTTP address (the page only reads, but keep it on loopback unless you mean otherwise)")
	sock := socketFlag(fs, e)
	interval := fs.Duration("interval", time.Second, "sampling interval")
	history := fs.Duration("history", 2*time.Minute, "how far back each flow's series reaches")
	nsPath := fs.String("netns", "", "sample inside the network namespace at PATH")
	group := fs.String("access-group", "", "the policy's access.group: its members see every flow's pid and process name (root always does; others their own)")
	return func(ctx context.Context, _ []string) error {
		if *interval < tcpmon.MinInterval {
			return usageErrorf("--interval %v is below %v", *interval, tcpmon.MinInterval)
		}
		smp, err := tcpmon.New(tcpmon.Config{Interval: *interval, NetNSPath: *nsPath})
		if err != nil {
			return err
		}
		defer smp.Close()
		cfg := dashboard.Config{Sampler: smp, History: *history, Log: slog.Default(), SeesAll: memberOf(*group)}
		d := client.New(*sock) // it dials again after an error: it follows a daemon that restarts
		defer d.Close()
		if _, err := d.Status(); err != nil {
			fmt.Fprintf(e.stderr, "%v: showing flows only until it answers\n", err)
		}
		cfg.Daemon = d
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		if *nsPath == "" { // its own connections are in this namespace: hide them
			if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
				cfg.Hide = []netip.AddrPort{ap}
			}
		}
		if h, _, err := net.SplitHostPort(*listen); err == nil && h != "" {
			cfg.Hosts = []string{h} // a name the user chose to listen on
		}
		srv := dashboard.New(cfg)
		hs := srv.HTTPServer()
		fmt.Fprintf(e.stdout, "lanes dashboard on http://%s/ (metrics: /metrics)\n", ln.Addr())
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Run(ctx) }()
		go func() {
			<-ctx.Done()
			sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
			defer c()
			_ = hs.Shutdown(sctx)
		}()
		err = hs.Serve(srv.Listener(ln))
		cancel()
		wg.Wait()
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// memberOf says whether a uid is a member of group (primary or
// supplementary, from the user database); nil for no group.
func memberOf(group string) func(uid uint32) bool {
	if group == "" {
		return nil
	}
	return func(uid uint32) bool {
		g, err := user.LookupGroup(group)
		if err != nil {
			return false
		}
		u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
		if err != nil {
			return false
		}
		ids, _ := u.GroupIds()
		return u.Gid == g.Gid || slices.Contains(ids, g.Gid)
	}
}
