// route.go: the egress class of each destination. When the egress device
// has no lanes HTB root (1:), skb->priority 1:11 would mean band 2 of
// pfifo_fast, so lanes-rtd sends to such destinations with priority 6
// (band 0). Which destinations leave through the lanes tree is kept in an
// immutable snapshot, resolved and refreshed every 2 s at normal priority
// (netlink dumps take the RTNL lock), never on lanes-rtd's path.
package rtlane

import (
	"context"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/lane"
)

// lookupClass asks the kernel: route to a, its device, the device's root
// qdisc. For the zero Addr (the guess for destinations not resolved yet):
// whether any device has the lanes tree.
func (l *Lane) lookupClass(a netip.Addr) bool {
	var links []netlink.Link
	if a.IsValid() {
		rs, err := l.nl.RouteGet(a.AsSlice())
		if err != nil || len(rs) == 0 {
			return false
		}
		link, err := l.nl.LinkByIndex(rs[0].LinkIndex)
		if err != nil {
			return false
		}
		links = []netlink.Link{link}
	} else {
		var err error
		if links, err = l.nl.LinkList(); err != nil {
			return false
		}
	}
	for _, link := range links {
		qs, err := l.nl.QdiscList(link)
		if err != nil {
			continue
		}
		for _, q := range qs {
			at := q.Attrs()
			if at.Parent == netlink.HANDLE_ROOT && at.Handle == uint32(lane.RootMajor)<<16 && q.Type() == "htb" {
				return true
			}
		}
	}
	return false
}

// tellHelper passes a destination's class on to lanes-rtd, if it runs.
func (l *Lane) tellHelper(a netip.Addr, c bool) {
	if p := l.rtd; p != nil {
		_ = l.sendRoute(p, a, c)
	}
}

// setRoute publishes one answer in a new snapshot; false if it was known.
func (l *Lane) setRoute(a netip.Addr, c bool) bool {
	l.routeMu.Lock()
	defer l.routeMu.Unlock()
	old := *l.routes.Load()
	if v, ok := old[a]; ok && v == c {
		return false
	}
	m := make(map[netip.Addr]bool, len(old)+1)
	if len(old) < 4096 {
		for k, v := range old {
			m[k] = v
		}
	}
	m[a] = c
	l.routes.Store(&m)
	return true
}

// forgetRoute drops a destination lanes-rtd no longer holds (unused, or
// displaced): it is not re-resolved any more.
func (l *Lane) forgetRoute(a netip.Addr) {
	l.routeMu.Lock()
	defer l.routeMu.Unlock()
	old := *l.routes.Load()
	if _, ok := old[a]; !ok || !a.IsValid() {
		return
	}
	m := make(map[netip.Addr]bool, len(old))
	for k, v := range old {
		if k != a {
			m[k] = v
		}
	}
	l.routes.Store(&m)
}

// refreshRoutes answers lookups for new destinations and re-resolves every
// known one each interval, so a lanes tree installed or removed later is
// followed. It runs at normal priority: netlink dumps take the RTNL lock.
func (l *Lane) refreshRoutes(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-l.lookups:
			c, ok := (*l.routes.Load())[a]
			if !ok {
				c = l.lookupClass(a)
				l.setRoute(a, c)
			}
			l.tellHelper(a, c)
		case <-t.C:
			for a := range *l.routes.Load() {
				if c := l.lookupClass(a); l.setRoute(a, c) {
					l.tellHelper(a, c)
				}
			}
		}
	}
}
