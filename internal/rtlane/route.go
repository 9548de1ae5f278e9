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
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/lane"
)

// routeTable is the egress class of each destination: an immutable
// snapshot, looked up for lanes-rtd by a goroutine at normal priority and
// refreshed every 2 s. Netlink dumps take the RTNL lock, which namespace
// churn elsewhere can hold for tens of milliseconds: never on lanes-rtd's
// path, which meanwhile uses the guess.
type routeTable struct {
	nl      *netlink.Handle // the lane's, bound to its namespace
	mu      sync.Mutex      // serializes writers of routes
	routes  atomic.Pointer[map[netip.Addr]bool]
	lookups chan netip.Addr // new destinations for the refresher
}

// routeTeller passes a destination's class on to lanes-rtd (the Lane).
type routeTeller interface {
	tellHelper(a netip.Addr, c bool)
}

// lookupClass asks the kernel: route to a, its device, the device's root
// qdisc. For the zero Addr (the guess for destinations not resolved yet):
// whether any device has the lanes tree.
func (r *routeTable) lookupClass(a netip.Addr) bool {
	var links []netlink.Link
	if a.IsValid() {
		rs, err := r.nl.RouteGet(a.AsSlice())
		if err != nil || len(rs) == 0 {
			return false
		}
		link, err := r.nl.LinkByIndex(rs[0].LinkIndex)
		if err != nil {
			return false
		}
		links = []netlink.Link{link}
	} else {
		var err error
		if links, err = r.nl.LinkList(); err != nil {
			return false
		}
	}
	for _, link := range links {
		qs, err := r.nl.QdiscList(link)
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
		_ = p.sendRoute(a, c)
	}
}

// setRoute publishes one answer in a new snapshot; false if it was known.
func (r *routeTable) setRoute(a netip.Addr, c bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.routes.Load()
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
	r.routes.Store(&m)
	return true
}

// askRoute passes a destination lanes-rtd asked about to the refresher.
// The refresher busy: dropped; lanes-rtd asks again at a later datagram
// (route.c, ROUTE_ASK_NS). Never answered from here: the caller must not
// write to the control socket while lanes-rtd may be blocked writing to it.
func (r *routeTable) askRoute(a netip.Addr) {
	select {
	case r.lookups <- a:
	default:
	}
}

// forgetRoute drops a destination lanes-rtd no longer holds (unused, or
// displaced): it is not re-resolved any more.
func (r *routeTable) forgetRoute(a netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.routes.Load()
	if _, ok := old[a]; !ok || !a.IsValid() {
		return
	}
	m := make(map[netip.Addr]bool, len(old))
	for k, v := range old {
		if k != a {
			m[k] = v
		}
	}
	r.routes.Store(&m)
}

// refreshRoutes answers lookups for new destinations and re-resolves every
// known one each interval, so a lanes tree installed or removed later is
// followed. It runs at normal priority: netlink dumps take the RTNL lock.
func (r *routeTable) refreshRoutes(ctx context.Context, every time.Duration, tell routeTeller) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-r.lookups:
			c, ok := (*r.routes.Load())[a]
			if !ok {
				c = r.lookupClass(a)
				r.setRoute(a, c)
			}
			tell.tellHelper(a, c)
		case <-t.C:
			for a := range *r.routes.Load() {
				if c := r.lookupClass(a); r.setRoute(a, c) {
					tell.tellHelper(a, c)
				}
			}
		}
	}
}
