// config.go is the policy's `background:` section: how background flows
// yield at a bottleneck that is not lanes' own queue.
package ledbat

import (
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

// Config is the `background:` section of the policy.
type Config struct {
	// CongestionControl of background TCP sockets: "ledbat" (LEDBAT++,
	// the default) or "system" (leave the socket's own).
	CongestionControl string `yaml:"congestion_control"`
	// TargetDelay is LEDBAT++'s queuing-delay target (default 10ms), also
	// rLEDBAT's.
	TargetDelay config.Duration `yaml:"target_delay"`
	// ReceiveWindow of background sockets: "rledbat" (RFC 9840: the
	// receiver limits the advertised window, the default) or "system".
	ReceiveWindow string `yaml:"receive_window"`
	// Yield: while the foreground lanes carry traffic, background sockets
	// are held at the minimum window (internal/yield; default true).
	Yield bool `yaml:"yield"`
}

// Congestion controls a background socket may be given.
const (
	CCLedbat  = "ledbat"
	CCSystem  = "system"
	RWRLEDBAT = "rledbat"
)

// DefaultConfig is used where the policy has no `background:` section.
func DefaultConfig() Config {
	return Config{CongestionControl: CCLedbat, ReceiveWindow: RWRLEDBAT, Yield: true,
		TargetDelay: config.Duration(DefaultTargetUS * time.Microsecond)}
}

// Validate checks the section.
func (c Config) Validate() error {
	switch c.CongestionControl {
	case CCLedbat, CCSystem:
	default:
		return config.Errorf("congestion_control", "%q is not %q or %q", c.CongestionControl, CCLedbat, CCSystem)
	}
	switch c.ReceiveWindow {
	case RWRLEDBAT, CCSystem:
	default:
		return config.Errorf("receive_window", "%q is not %q or %q", c.ReceiveWindow, RWRLEDBAT, CCSystem)
	}
	if d := c.TargetDelay.D(); d < time.Millisecond || d > time.Second {
		return config.Errorf("target_delay", "%v out of range 1ms..1s", c.TargetDelay)
	}
	return nil
}

// Target is the datapath's LEDBAT++ target: negative when background
// sockets keep the system congestion control.
func (c Config) Target() time.Duration {
	if c.CongestionControl == CCSystem {
		return -1
	}
	return c.TargetDelay.D()
}

// ReceiveTarget is rLEDBAT's target: negative when background sockets keep
// the system's receive window.
func (c Config) ReceiveTarget() time.Duration {
	if c.ReceiveWindow == CCSystem {
		return -1
	}
	return c.TargetDelay.D()
}
