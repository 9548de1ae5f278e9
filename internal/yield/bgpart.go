// bgpart.go: the harm test's background part (sock_ops bgpart.h), as the
// BPF code applies it behind the daemon's lab switch --harm-part (the
// default: any delay over HarmQueue holds): a foreground socket's delay
// over HarmQueue holds the background only where the background's bytes
// in flight beyond the hold's window, at the foreground's delivery rate,
// are what puts it over.
package yield

import "time"

// PartSegments is BG_PART_SEGS: what a hold leaves in flight, segments
// (the yield's window), not counted in a background socket's part.
const PartSegments = 2

// Part is one interface's struct bg_part (bgpart.h): its background TCP
// sockets' bytes beyond the hold's window, when one last changed them
// (CLOCK_MONOTONIC ns), and the foreground samples over HarmQueue not
// counted as harm.
type Part struct {
	Bytes      int64
	At, Spared uint64
}

// Relief is what holding the background would take off a foreground
// delivering rateBps bytes/s: the part's bytes at that rate.
func (p Part) Relief(rateBps uint64) time.Duration {
	if rateBps == 0 || p.Bytes <= 0 {
		return 0
	}
	return time.Duration(uint64(p.Bytes) * 1e6 / rateBps * uint64(time.Microsecond))
}

// Harms says whether a foreground sample qd above its minimum (over
// HarmQueue), delivering rateBps bytes/s, is harm at now, as
// bg_part_harms does: the part is not known (no background TCP socket
// counted within the hold, or no rate), or without the relief the delay
// would be within HarmQueue.
func (p Part) Harms(qd time.Duration, rateBps, now uint64) bool {
	if rateBps == 0 || p.At == 0 || now-p.At >= uint64(KernelRule.Hold) {
		return true
	}
	return qd <= HarmQueue+p.Relief(rateBps)
}
