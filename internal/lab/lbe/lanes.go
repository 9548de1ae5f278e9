// lanes.go: running the lanes daemon inside a lab host (methods 4 and 6).
//
// The daemon manages the phone's up0 in shaped mode with a rate far above
// the link's, so its leaves never limit; the lab then drives the daemon's
// root class 1:1 exactly like its own gate (rate = the link's, following the
// trace; burst = the emulated device queue), because on Linux 6.18 a TUN
// never stops its queue and the daemon's HTB would otherwise not back up.
package lbe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

func lanesSocket(b *testbed.Bed) string {
	return filepath.Join(os.TempDir(), "lanes-lab-"+b.Topo.ID+".sock")
}

func startLanes(ctx context.Context, env *testbed.Env, c *LBEConfig, m LBEMethod, bed *testbed.Bed, phone *topo.Node) (*topo.Proc, error) {
	if !testbed.LanesAvailable(c.Lanes) {
		return nil, fmt.Errorf("method %s needs the lanes daemon (%s has none)", m.ID, c.Lanes)
	}
	upCfg, _, err := c.linkConfigs()
	if err != nil {
		return nil, err
	}
	rate := upCfg.Rate
	if upCfg.Trace != nil {
		rate = upCfg.Trace.MeanRate()
	}
	pol := ""
	if env != nil && env.Policy != "" {
		pol = env.Policy // the user's: it must manage up0 (shaped) for the gate to apply
	} else {
		dir, err := os.MkdirTemp("", "lanes-lab-policy-")
		if err != nil {
			return nil, err
		}
		pol = filepath.Join(dir, "policy.yaml")
		text := fmt.Sprintf("# lab policy for method %s: the phone's uplink, shaped far above the link;\n# the lab drives class 1:1 as the device gate.\ninterfaces:\n  - name: %s\n    mode: shaped\n    uplink: %dbit\n",
			m.ID, testbed.TUNName, uint64(rate*50))
		if err := os.WriteFile(pol, []byte(text), 0o644); err != nil {
			return nil, err
		}
		bed.PolicyFiles = append(bed.PolicyFiles, dir)
		if env != nil {
			env.LastPolicy = pol
		}
	}
	sock := lanesSocket(bed)
	d, err := phone.StartCommand(c.Lanes, "daemon", "--policy", pol, "--socket", sock)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			if out, err := phone.Run("tc", "class", "show", "dev", testbed.TUNName); err == nil && strings.Contains(out, "1:1 ") {
				break
			}
		}
		select {
		case <-d.Done():
			return nil, fmt.Errorf("lanes daemon exited: %v", d.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lanes daemon did not install its tree on %s within 20 s", testbed.TUNName)
		}
	}
	g, err := phone.AdoptGate(testbed.TUNName, m.Queue)
	if err != nil {
		return nil, err
	}
	if err := g.SetRate(rate); err != nil {
		return nil, err
	}
	bed.Gates[phone.Name] = g
	bed.GateLinks[phone.Name] = bed.Hosts[phone.Name].Up
	return d, nil
}
