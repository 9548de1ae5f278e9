// downestimate.go: the account's download capacity estimate of a link,
// the one rule both its readers keep: status's account (the daemon's
// account_rates.go) and the held-ACK pacer (heldack.go). A download's
// capacity is not measured by any socket (the upload's is sock_ops'
// lanes_link_rate), so it is read from the interface's arrivals: their
// largest rate between two reads, halved every linkRateHalf without one
// as high (as cwndcap.h's upload estimate decays).
package datapath

import "time"

// DownEstimate is one link's download capacity estimate; the zero value
// has no reading yet.
type DownEstimate struct {
	at, maxAt time.Time
	rx        uint64
	read      bool   // at and rx are a reading
	max       uint64 // bit/s
}

// Add takes the interface's received bytes rx at now and returns the
// estimate, bit/s (0 before two readings).
func (d *DownEstimate) Add(now time.Time, rx uint64) uint64 {
	if d.read && rx >= d.rx && now.After(d.at) {
		bps := uint64(float64(rx-d.rx) * 8 / now.Sub(d.at).Seconds())
		if bps > d.At(now) {
			d.max, d.maxAt = bps, now
		}
	}
	d.at, d.rx, d.read = now, rx, true
	return d.At(now)
}

// Miss notes a reading that failed: the next one starts a new interval.
func (d *DownEstimate) Miss() { d.read = false }

// At is the estimate at now, bit/s.
func (d *DownEstimate) At(now time.Time) uint64 {
	age := now.Sub(d.maxAt)
	if age < 0 {
		return d.max
	}
	halves := age / linkRateHalf
	if halves >= 64 {
		return 0
	}
	return d.max >> uint(halves)
}
