// status_account.go: status's account lines, two per direction of an
// interface: the link's capacity estimate, whose its queue is by the last
// cause test, and whether background is held there now; then each lane's
// share of the link and why the background is where it is.
package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// printAccount writes it's account, a line per direction.
func printAccount(w io.Writer, it api.InterfaceStatus) {
	for _, a := range it.Account {
		fmt.Fprintln(w, accountLine(a))
		if l := sharesLine(a); l != "" {
			fmt.Fprintln(w, l)
		}
	}
}

// sharesLine is a direction's lane shares and why its background is where
// it is, e.g. "  up: realtime 0%, interactive 1%, background 93% of the
// link; why: free"; each lane's rate where the link is not
// measured; "" from a daemon that sends neither.
func sharesLine(a api.LinkAccount) string {
	if len(a.Shares) == 0 && a.Why == "" {
		return ""
	}
	shares := "no lane counters"
	if len(a.Shares) > 0 {
		parts := make([]string, 0, len(a.Shares))
		for _, s := range a.Shares {
			if a.CapacityBps > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", s.Lane, 100*s.Share))
			} else {
				parts = append(parts, fmt.Sprintf("%s %s", s.Lane, udpflow.FormatRate(float64(s.Bps))))
			}
		}
		shares = strings.Join(parts, ", ")
		if a.CapacityBps > 0 {
			shares += " of the link"
		}
	}
	why := a.Why
	if why == "" {
		why = "?"
	}
	return fmt.Sprintf("  %s: %s; why: %s", a.Dir, shares, why)
}

// accountLine is one direction's account for people, e.g. "account up:
// link ~9.80Mbit/s, queue: not background's (tested 3s ago), background
// not held".
func accountLine(a api.LinkAccount) string {
	link := "link not measured"
	if a.CapacityBps > 0 {
		link = "link ~" + udpflow.FormatRate(float64(a.CapacityBps)) + "/s"
	}
	ago := (time.Duration(a.TestedAgoMS) * time.Millisecond).Round(100 * time.Millisecond)
	queue := "untested"
	switch a.QueueOwner {
	case "background", "not background":
		queue = fmt.Sprintf("%s's (tested %v ago)", a.QueueOwner, ago)
	case "testing":
		queue = fmt.Sprintf("under test (for %v)", ago)
	}
	held := "background not held"
	if a.Held {
		held = "background held"
	}
	return fmt.Sprintf("account %s: %s, queue: %s, %s", a.Dir, link, queue, held)
}
