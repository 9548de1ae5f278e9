// bgcc.go loads the background lane's congestion control (LEDBAT++,
// internal/bpf/ledbat) for one datapath and reports it. sock_ops switches
// every background TCP socket to it, so a background upload yields at a
// bottleneck that is not lanes' own queue (a router's or base station's
// buffer). Without it (no struct_ops) background sockets keep the system's
// congestion control and the datapath says so.
package datapath

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	model "github.com/lanes-net/lanes/internal/ledbat"
)

// BackgroundCCStatus says whether background sockets run LEDBAT++, under
// which name and target, and if not why.
type BackgroundCCStatus struct {
	Active bool          `json:"active"`
	Name   string        `json:"name,omitempty"`   // kernel congestion control name
	Target time.Duration `json:"target,omitempty"` // queuing delay target
	Reason string        `json:"reason,omitempty"` // why it is not active
}

// loadBackgroundCC registers this datapath's LEDBAT++ (target from cfg:
// 0 = the default, negative = off). A failure is reported, not fatal.
func (d *Datapath) loadBackgroundCC(cookie uint64) {
	target := d.cfg.BackgroundTarget
	if target < 0 {
		d.bgErr = fmt.Errorf("off by policy")
		return
	}
	if target == 0 {
		target = model.DefaultTargetUS * time.Microsecond
	}
	name := capcc.Name(d.cfg.Instance, d.cfg.Interface, fmt.Sprint(cookie), "background")
	if d.bg, d.bgErr = ledbat.Load(name, target); d.bgErr != nil {
		slog.Warn("datapath: no LEDBAT++ for background sockets: they keep the system congestion control and yield only at lanes' own queue",
			"interface", d.cfg.Interface, "instance", d.cfg.Instance, "err", d.bgErr)
	}
}

// bgCCName is the name sock_ops switches background sockets to ("" = none).
func (d *Datapath) bgCCName() string {
	if d.bg == nil {
		return ""
	}
	return d.bg.Name
}

// BackgroundCC reports the background lane's congestion control.
func (d *Datapath) BackgroundCC() BackgroundCCStatus {
	if d.check() != nil {
		return BackgroundCCStatus{Reason: errClosed.Error()}
	}
	if d.bg == nil {
		r := "not loaded"
		if d.bgErr != nil {
			r = d.bgErr.Error()
		}
		return BackgroundCCStatus{Reason: r}
	}
	return BackgroundCCStatus{Active: true, Name: d.bg.Name, Target: d.bg.Target}
}
