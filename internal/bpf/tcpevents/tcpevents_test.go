// tcpevents_test.go: the loader's argument checks, and (as root) that the
// program loads with its configuration, attaches and detaches cleanly.
// Events themselves are tested with real connections in internal/tcpmon.
package tcpevents

import (
	"os"
	"testing"
	"time"
)

func TestOpenArguments(t *testing.T) {
	if _, err := Open(Config{}); err == nil {
		t.Error("nothing to trace accepted")
	}
	if _, err := Open(Config{State: true, Ports: make([]uint16, MaxPorts+1)}); err == nil {
		t.Error("too many ports accepted")
	}
}

func TestOpenClose(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, cfg := range []Config{
		{State: true, Ports: []uint16{1}},
		{Probe: true, Ports: []uint16{1, 2}, ProbeGap: time.Millisecond},
		{Probe: true, State: true, AllSegments: true, Ports: []uint16{1}, RingSize: 1 << 16}, // port 1: nothing to drop
	} {
		tr, err := Open(cfg)
		if err != nil {
			t.Fatalf("Open(%+v): %v", cfg, err)
		}
		if n, err := tr.Dropped(); err != nil || n != 0 {
			t.Errorf("Dropped() = %d, %v on a fresh tracer", n, err)
		}
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
