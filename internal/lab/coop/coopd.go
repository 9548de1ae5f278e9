// coopd.go: the lanes daemons of the coop testbed. Every lanes host runs
// `lanes daemon --policy P --socket S` in its namespace, as a user would:
//
//   - P manages up0 in device-bottleneck mode (the emulated AP, not the
//     host, is the bottleneck these experiments study, and the caps act in
//     TCP, not in the qdisc; lbe's shaped mode and HTB gate exist for
//     priority in the host queue, which a TUN never backs up) and has a
//     `coop:` section: the bed's group key, the announcements' transport
//     (default `ipv4`: broadcast, which the emulator relays once up and once
//     down the medium; `ipv6`, `both`) or, in a bed announcing by unicast,
//     unicast_peers = the other lanes hosts, and the experiment's ap_rate,
//     headroom, safety and rules;
//   - the daemon is waited for until its API answers and its coop component
//     reports, and stopped with SIGTERM (it removes what it installed) when
//     the bed closes; the topology kills it on failure or cancellation.
package coop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/policy"
)

// daemonStartTimeout bounds the wait for a daemon's API.
const daemonStartTimeout = 30 * time.Second

// startDaemons writes each lanes host's policy and starts its daemon, all
// at once, then waits until every one answers.
func (cb *coopBed) startDaemons(ctx context.Context, env *testbed.Env) error {
	var lanesHosts []*coopHost
	for _, h := range cb.hosts {
		if h.lanes {
			lanesHosts = append(lanesHosts, h)
		}
	}
	if len(lanesHosts) == 0 {
		return nil
	}
	if !testbed.LanesAvailable(cb.cfg.Lanes) {
		return fmt.Errorf("the lanes hosts run `lanes daemon`, but %q is no lanes binary with a daemon command (build one: go build -o bin/lanes ./cmd/lanes, then pass --lanes bin/lanes)", cb.cfg.Lanes)
	}
	dir, err := os.MkdirTemp("", "lanes-lab-coop-")
	if err != nil {
		return fmt.Errorf("policy folder: %w", err)
	}
	cb.bed.PolicyFiles = append(cb.bed.PolicyFiles, dir) // removed with the bed, after its processes
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("group key: %w", err)
	}
	for _, h := range lanesHosts {
		cfg := cb.cfg.Coop
		cfg.Enabled, cfg.Interface, cfg.Port, cfg.Key, cfg.KeyFile = true, testbed.TUNName, coopAnnPort, hex.EncodeToString(key), ""
		cfg.Transport, cfg.UnicastPeers = cb.cfg.Announce, nil
		if cfg.Transport == "" || cfg.Transport == "unicast" {
			cfg.Transport = coop.TransportIPv4
		}
		for _, p := range lanesHosts {
			if p != h && cb.cfg.Announce == "unicast" {
				cfg.UnicastPeers = append(cfg.UnicastPeers, p.node.Addr.String())
			}
		}
		cfg.StateFile = filepath.Join(dir, h.node.Name+".coop-replay.json")
		pol := filepath.Join(dir, h.node.Name+".yaml")
		text := coopPolicyYAML(h.node.Name, cfg)
		// the daemon would refuse a bad file too; this says so before 8 start
		if _, err := policy.Parse(pol, []byte(text)); err != nil {
			return fmt.Errorf("lab policy for %s: %w", h.node.Name, err)
		}
		if err := os.WriteFile(pol, []byte(text), 0o600); err != nil {
			return fmt.Errorf("write policy: %w", err)
		}
		if env != nil {
			env.LastPolicy = pol
		}
		h.sock = filepath.Join(dir, h.node.Name+".sock")
		if h.daemon, err = h.node.StartCommand(cb.cfg.Lanes, "daemon", "--policy", pol, "--socket", h.sock); err != nil {
			return err
		}
	}
	errs := make([]error, len(lanesHosts))
	var wg sync.WaitGroup
	for k, h := range lanesHosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = h.waitDaemon(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitDaemon waits until the host's daemon answers on its API and its coop
// component reports a status.
func (h *coopHost) waitDaemon(ctx context.Context) error {
	deadline := time.Now().Add(daemonStartTimeout)
	var last error
	for {
		if h.api == nil {
			if c, err := client.Dial(h.sock); err == nil {
				h.api = c
			} else {
				last = err
			}
		}
		if h.api != nil {
			if _, err := h.coopStatus(); err == nil {
				return nil
			} else {
				last = err
			}
		}
		select {
		case <-h.daemon.Done():
			return fmt.Errorf("lanes daemon in %s exited: %v", h.node.Name, h.daemon.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lanes daemon in %s did not answer within %v: %v", h.node.Name, daemonStartTimeout, last)
		}
	}
}

// coopStatus is the host daemon's coop component status (`lanes coop
// status`).
func (h *coopHost) coopStatus() (*coop.Status, error) {
	raw, err := h.api.Component("coop")
	if err != nil {
		return nil, fmt.Errorf("coop status of %s: %w", h.node.Name, err)
	}
	var st coop.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("coop status of %s: %w", h.node.Name, err)
	}
	return &st, nil
}

// stopDaemons stops every daemon with SIGTERM (at once; each removes its
// datapath) and reports those that did not exit cleanly.
func (cb *coopBed) stopDaemons() error {
	var wg sync.WaitGroup
	errs := make([]error, len(cb.hosts))
	for i, h := range cb.hosts {
		if h.api != nil {
			h.api.Close()
		}
		if h.daemon == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.daemon.Stop()
			if err := h.daemon.Err(); err != nil {
				errs[i] = fmt.Errorf("lanes daemon in %s: %w", h.node.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// coopPolicyYAML is the policy file of one lanes host of the bed.
func coopPolicyYAML(host string, c config.Coop) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# lab policy of %s (coop testbed): %s managed without a rate (the emulated", host, testbed.TUNName)
	p("# AP is the bottleneck); cooperative caps with the other lanes hosts.")
	p("interfaces:")
	p("  - name: %s", testbed.TUNName)
	p("    mode: %s", policy.DeviceBottleneck)
	p("coop:")
	p("  enabled: %t", c.Enabled)
	p("  cooperative: %t", c.Cooperative)
	p("  interface: %s", c.Interface)
	p("  port: %d", c.Port)
	p("  key: %q", c.Key)
	p("  transport: %s", c.Transport)
	if len(c.UnicastPeers) > 0 {
		p("  unicast_peers:")
		for _, a := range c.UnicastPeers {
			p("    - %s", a)
		}
	}
	p("  interval: %s", c.Interval)
	p("  silence_intervals: %d", c.SilenceIntervals)
	p("  max_clock_skew: %s", c.MaxClockSkew)
	if c.StateFile != "" {
		p("  state_file: %q", c.StateFile)
	}
	p("  ap_rate: %s", c.APRate)
	p("  downlink_caps: %t", c.DownlinkCaps)
	if c.APDownlinkRate > 0 {
		p("  ap_downlink_rate: %s", c.APDownlinkRate)
	}
	p("  headroom: %s", c.Headroom)
	p("  min_segments: %d", c.MinSegments)
	p("  demand_aware: %t", c.DemandAware)
	p("  queue_allowance: %s", strconv.FormatFloat(c.QueueAllowance, 'g', -1, 64))
	p("  safety:")
	p("    enabled: %t", c.Safety.Enabled)
	p("    rtt_inflation: %s", strconv.FormatFloat(c.Safety.RTTInflation, 'g', -1, 64))
	p("    goodput_fraction: %s", strconv.FormatFloat(c.Safety.GoodputFraction, 'g', -1, 64))
	p("    trigger_intervals: %d", c.Safety.Trigger)
	if c.Safety.DrainIntervals != config.DefaultCoop().Safety.DrainIntervals { // only then: a daemon from before it still reads the file
		p("    drain_intervals: %d", c.Safety.DrainIntervals)
	}
	p("    hold: %s", c.Safety.Hold)
	if len(c.Rules) > 0 {
		p("  rules:")
		for _, r := range c.Rules {
			p("    - name: %s", r.Name)
			if r.Lane != "" {
				p("      lane: %s", r.Lane)
			}
			if r.App != "" {
				p("      app: %q", r.App)
			}
			if r.When != "" {
				p("      when: %s", r.When)
			}
			p("      segments: %d", r.Segments)
		}
	}
	return b.String()
}
