// status_account.go: status's account lines, one per direction of an
// interface: the link's capacity estimate, whose its queue is by the last
// cause test, and whether background is held there now.
package main

import (
	"fmt"
	"io"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// printAccount writes it's account, a line per direction.
func printAccount(w io.Writer, it api.InterfaceStatus) {
	for _, a := range it.Account {
		fmt.Fprintln(w, accountLine(a))
	}
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
