// background.go is the policy's `background:` section: how background
// flows yield at a bottleneck that is not lanes' own queue (run by
// internal/ledbat, internal/bpf/ledbat and internal/rledbat).
package config

import (
	"time"
)

// Background is the `background:` section of the policy.
type Background struct {
	// CongestionControl of background TCP sockets: "ledbat" (LEDBAT++,
	// the default) or "system" (leave the socket's own).
	CongestionControl string `yaml:"congestion_control"`
	// TargetDelay is LEDBAT++'s queuing-delay target (default 10ms), also
	// rLEDBAT's.
	TargetDelay Duration `yaml:"target_delay"`
	// ReceiveWindow of background sockets: "rledbat" (RFC 9840: the
	// receiver limits the advertised window, the default) or "system".
	ReceiveWindow string `yaml:"receive_window"`
	// Yield: while the foreground lanes carry traffic, background sockets
	// are held at the minimum window (internal/yield; default true).
	Yield bool `yaml:"yield"`
}

// DefaultTargetDelayUS is LEDBAT++'s default queuing-delay target in µs
// (the model's, the BPF congestion control's and rLEDBAT's).
const DefaultTargetDelayUS = 10_000

// Congestion controls a background socket may be given.
const (
	BackgroundLedbat  = "ledbat"
	BackgroundSystem  = "system"
	BackgroundRLEDBAT = "rledbat"
)

// DefaultBackground is used where the policy has no `background:` section.
func DefaultBackground() Background {
	return Background{CongestionControl: BackgroundLedbat, ReceiveWindow: BackgroundRLEDBAT, Yield: true,
		TargetDelay: Duration(DefaultTargetDelayUS * time.Microsecond)}
}

// Validate checks the section.
func (c Background) Validate() error {
	switch c.CongestionControl {
	case BackgroundLedbat, BackgroundSystem:
	default:
		return Errorf("congestion_control", "%q is not %q or %q", c.CongestionControl, BackgroundLedbat, BackgroundSystem)
	}
	switch c.ReceiveWindow {
	case BackgroundRLEDBAT, BackgroundSystem:
	default:
		return Errorf("receive_window", "%q is not %q or %q", c.ReceiveWindow, BackgroundRLEDBAT, BackgroundSystem)
	}
	if d := c.TargetDelay.D(); d < time.Millisecond || d > time.Second {
		return Errorf("target_delay", "%v out of range 1ms..1s", c.TargetDelay)
	}
	return nil
}

// Target is the datapath's LEDBAT++ target: negative when background
// sockets keep the system congestion control.
func (c Background) Target() time.Duration {
	if c.CongestionControl == BackgroundSystem {
		return -1
	}
	return c.TargetDelay.D()
}

// ReceiveTarget is rLEDBAT's target: negative when background sockets keep
// the system's receive window.
func (c Background) ReceiveTarget() time.Duration {
	if c.ReceiveWindow == BackgroundSystem {
		return -1
	}
	return c.TargetDelay.D()
}
