// spacing.go: the interval a host announces is the spacing it keeps.
// Peers remove a host silent for silence_intervals of its announced
// interval; a host whose loop cannot keep the configured interval (a
// starved machine: in qemu without KVM, three daemons beside three
// downloads announced 1 to 6 times a second at a 100 ms interval) would be
// removed and readmitted about every second, and N would flap with it. So
// each announcement carries the larger of the configured interval and the
// longest of this host's last spacingKept gaps between announcements,
// bounded by maxIntervalFactor configured intervals: peers then wait for
// the spacing the host really keeps, and a host slower than the bound is
// removed as before.
package coop

import "time"

// spacingKept is how many of the latest gaps between this host's
// announcements the announced interval covers.
const spacingKept = 8

// maxIntervalFactor bounds the announced interval, in configured
// intervals.
const maxIntervalFactor = 10

// spacing remembers when this host announced and the latest gaps.
type spacing struct {
	last time.Time
	gaps [spacingKept]time.Duration
	n    int
}

// note records an announcement sent at now.
func (s *spacing) note(now time.Time) {
	if !s.last.IsZero() && now.After(s.last) {
		s.gaps[s.n%len(s.gaps)] = now.Sub(s.last)
		s.n++
	}
	s.last = now
}

// interval is the interval to announce with a configured interval cfg.
func (s *spacing) interval(cfg time.Duration) time.Duration {
	iv := cfg
	for _, g := range s.gaps[:min(s.n, len(s.gaps))] {
		iv = max(iv, g)
	}
	return min(iv, maxIntervalFactor*cfg)
}
