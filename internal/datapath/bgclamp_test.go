// bgclamp_test.go checks which way the host holds background uploads:
// LEDBAT++ as their congestion control where it loads; without it (no
// struct_ops, simulated by HostConfig.Off) LEDBAT++'s window as their cwnd
// clamp from sock_ops, set into the program's config (with the share rule
// less the parts experiments.ShareOff leaves off) and named in the
// capabilities and the background status; neither when that is off too.
package datapath

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/experiments"
	model "github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundModeChosen(t *testing.T) {
	requireCgroup2(t)
	noStructOps := ledbat.Probe()
	for _, c := range []struct {
		name       string
		off        []Capability
		shareOff   experiments.ShareOff
		mode       string
		clampUS    uint32
		clampShare uint32
		clampCaps  string
	}{
		{"struct_ops", nil, experiments.ShareOff{}, "congestion control", 0, 0, "off: LEDBAT++ is the background congestion control"},
		{"no_struct_ops", []Capability{CapBackgroundCC, CapCapCC}, experiments.ShareOff{}, "cwnd clamp", model.DefaultTargetUS, ledbat.ShareRule, "on"},
		{"no_struct_ops_share_off", []Capability{CapBackgroundCC, CapCapCC}, experiments.ShareOff{Slope: true, Download: true},
			"cwnd clamp", model.DefaultTargetUS, ledbat.ShareRule &^ ledbat.ShareSlope, "on"},
		{"neither", []Capability{CapBackgroundCC, CapCapCC, CapBgClamp}, experiments.ShareOff{}, "none", 0, 0, "off: left off (test)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.mode == "congestion control" && structops.Unsupported(noStructOps) {
				t.Skipf("kernel refuses struct_ops congestion controls: %v", noStructOps)
			}
			off := map[Capability]string{}
			for _, o := range c.off {
				off[o] = "left off (test)"
			}
			ns := testutil.NewNetNS(t)
			var h *Host
			ns.Do(t, func() (err error) {
				h, err = OpenHost(HostConfig{Instance: "bgmode-" + c.name, Off: off, Experiments: experiments.Set{Share: c.shareOff}})
				return err
			})
			defer h.Close()
			bg := h.CCs.BackgroundCC()
			if bg.Mode() != c.mode {
				t.Errorf("background mode %q (%+v), want %q", bg.Mode(), bg, c.mode)
			}
			if got := h.Capabilities()[CapBgClamp]; got != c.clampCaps {
				t.Errorf("background_clamp: %q, want %q", got, c.clampCaps)
			}
			if c.mode == "cwnd clamp" && bg.Target != time.Duration(model.DefaultTargetUS)*time.Microsecond {
				t.Errorf("clamp target %v, want the default %d µs", bg.Target, model.DefaultTargetUS)
			}
			var cfg sockops.SockopsSockopsConfig
			if err := h.ops.CFG.Get(&cfg); err != nil {
				t.Skipf("cannot read the program's config: %v", err)
			}
			if cfg.BgClampTargetUs != c.clampUS || (c.clampUS != 0 && cfg.BgCcName[0] != 0) {
				t.Errorf("sock_ops config: clamp target %d µs, background congestion control named: %v; want %d µs",
					cfg.BgClampTargetUs, cfg.BgCcName[0] != 0, c.clampUS)
			}
			if cfg.BgClampShare != c.clampShare {
				t.Errorf("sock_ops config: clamp share rule %#x, want %#x", cfg.BgClampShare, c.clampShare)
			}
		})
	}
}
