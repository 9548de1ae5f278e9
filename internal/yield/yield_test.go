// yield_test.go: the status of the kernel's yield windows.
package yield

import (
	"testing"
	"time"
)

func TestStatusOf(t *testing.T) {
	wall := time.Unix(1000, 0)
	now := uint64(50 * time.Second)
	ms := func(d int) uint64 { return now - uint64(time.Duration(d)*time.Millisecond) }
	windows := map[string]Window{
		"eth0":  {Active: ms(100), Since: ms(2000), Episodes: 3}, // held
		"wlan0": {Active: ms(600), Since: ms(900), Episodes: 2},  // the hold is over
	}
	s := StatusOf(windows, now, wall)
	if !s.Yielding || s.Yields != 5 {
		t.Errorf("status %+v, want yielding with 5 yields", s)
	}
	if e := s.Interfaces["eth0"]; !e.Yielding || !e.Since.Equal(wall.Add(-2*time.Second)) {
		t.Errorf("eth0 %+v, want yielding since 2 s ago", e)
	}
	if w, ok := s.Interfaces["wlan0"]; !ok || w.Yielding {
		t.Errorf("wlan0 %+v %v, want listed, not yielding", w, ok)
	}
}
