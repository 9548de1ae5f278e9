// links.go is what the daemon asks of the world outside the datapath:
// which interfaces exist, where the default route points, a cgroup's id,
// and when any of that changes. The kernel versions use netlink (routes and
// links, with subscriptions) and the cgroup v2 mount; tests give fakes.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/policy"
)

// Links answers questions about the namespace's interfaces and routes.
type Links interface {
	// DefaultRoute is the interface of the IPv4 default route, else of the
	// IPv6 one (lowest metric first).
	DefaultRoute() (string, error)
	// Index is the interface's ifindex, false if it does not exist.
	Index(name string) (int, bool)
}

// env holds the daemon's seams to the kernel.
type env struct {
	openHost func(datapath.HostConfig) (*datapathHost, error)
	links    Links
	cgroupID func(rel string) (uint64, error) // cgroup path relative to the v2 root
	// watch calls changed (soon) after an interface or route changes,
	// until ctx ends.
	watch func(ctx context.Context, changed func()) error
	// liveSockets are the cookies of a flow's connected TCP sockets (of
	// uid, if >= 0): sock_diag (livesockets.go).
	liveSockets func(f api.Flow, uid int64) ([]uint64, error)
	// localAddrs are the local addresses of a flow's open sockets
	// (sock_diag on its port: diagowners.go).
	localAddrs func(f api.Flow) ([]netip.Addr, error)
	// openSockets are the namespace's TCP and UDP sockets (sock_diag:
	// livemove.go).
	openSockets func() ([]openSock, error)
}

func kernelEnv(cg *cgroupMount) env {
	return env{
		openHost: func(c datapath.HostConfig) (*datapathHost, error) {
			h, err := datapath.OpenHost(c)
			if err != nil {
				return nil, err
			}
			return kernelHost(h), nil
		},
		links:    netlinkLinks{},
		cgroupID: cg.id,
		watch:    watchNetlink,

		liveSockets: liveSocketsOf,
		localAddrs:  diagOwners{procOwners: procOwners{proc: "/proc"}}.localAddrs,
		openSockets: dumpOpenSockets,
	}
}

// netlinkLinks reads the current network namespace.
type netlinkLinks struct{}

func (netlinkLinks) DefaultRoute() (string, error) { return DefaultRouteInterface() }

func (netlinkLinks) Index(name string) (int, bool) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0, false
	}
	return l.Attrs().Index, true
}

// DefaultRouteInterface returns the interface of the IPv4 default route,
// else of the IPv6 one; among several, the lowest metric.
func DefaultRouteInterface() (string, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return "", fmt.Errorf("list routes: %w", err)
		}
		best, idx := -1, 0
		for _, r := range routes {
			if r.Dst != nil && !isDefaultDst(r) || r.LinkIndex == 0 {
				continue
			}
			if best < 0 || r.Priority < best {
				best, idx = r.Priority, r.LinkIndex
			}
		}
		if best >= 0 {
			l, err := netlink.LinkByIndex(idx)
			if err != nil {
				return "", fmt.Errorf("default route's interface %d: %w", idx, err)
			}
			return l.Attrs().Name, nil
		}
	}
	return "", errors.New("no default route (IPv4 or IPv6) yet")
}

func isDefaultDst(r netlink.Route) bool {
	ones, _ := r.Dst.Mask.Size()
	return ones == 0
}

// watchNetlink subscribes to link and route changes of the namespace.
func watchNetlink(ctx context.Context, changed func()) error {
	done := make(chan struct{})
	defer close(done)
	links := make(chan netlink.LinkUpdate, 64)
	routes := make(chan netlink.RouteUpdate, 64)
	errc := func(err error) { slog.Debug("netlink subscription", "err", err) }
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{ErrorCallback: errc}); err != nil {
		return fmt.Errorf("subscribe to link changes: %w", err)
	}
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{ErrorCallback: errc}); err != nil {
		return fmt.Errorf("subscribe to route changes: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-links:
			if !ok {
				return errors.New("link subscription closed")
			}
		case _, ok := <-routes:
			if !ok {
				return errors.New("route subscription closed")
			}
		}
		changed()
	}
}

// followInterval bounds how late a cgroup that appears is noticed (no
// event exists for it) while the policy waits for one, and how soon a
// failed diff is retried.
const followInterval = 500 * time.Millisecond

// follow re-applies the desired state whenever an interface or route
// changes (netlink events), until ctx ends. It polls, every
// followInterval, only while something has no event to wake it: a cgroup
// the policy waits for, a diff that failed, a subscription that broke (it
// is renewed after a second, with one re-apply for what it missed). At
// rest it sleeps: a phone's daemon must not wake twice a second for
// nothing.
func (d *Daemon) follow(ctx context.Context) {
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	d.kernel.mu.Lock()
	d.kernel.followKick = changed
	d.kernel.mu.Unlock()
	go func() {
		for ctx.Err() == nil {
			err := d.env.watch(ctx, changed)
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("interface/route events: subscription ended, renewing it", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			changed()
		}
	}()
	// One pass at once: it arms the poll if the start's state already
	// waits for a cgroup. Without it the first poll waited for a netlink
	// event after this point, which a start can finish without
	// (TestCgroupCreatedLaterGetsItsLane failed whenever the daemon's last
	// event came before this loop).
	changed()
	t := time.NewTimer(followInterval)
	defer t.Stop()
	var poll <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-poll:
		}
		d.kernel.mu.Lock()
		again := false
		if d.kernel.host != nil {
			w := d.kernel.desiredFor(d.kernel.pol)
			err := d.kernel.applyLocked(w, false)
			if err != nil {
				d.kernel.logApplyError(err)
			}
			again = err != nil || w.waitCgroups > 0
		}
		d.kernel.mu.Unlock()
		poll = nil
		if again {
			t.Reset(followInterval)
			poll = t.C
		}
	}
}

// kickFollowLocked makes the follow loop re-apply and decide again whether to
// poll (after a reload, which may wait for a cgroup).
func (ks *kernelState) kickFollowLocked() {
	if ks.followKick != nil {
		ks.followKick()
	}
}

// logApplyError logs a failed diff once until it changes.
func (ks *kernelState) logApplyError(err error) {
	if s := err.Error(); s != ks.lastApplyErr {
		ks.log.Warn("datapath not in the desired state (retried)", "err", err)
		ks.lastApplyErr = s
	}
}

// CheckInterfaces reports, as `lanes daemon --check` does, each interface
// the policy names that does not exist in this network namespace (the
// daemon itself waits for it and manages it when it appears), and a
// default-route entry without a default route.
func CheckInterfaces(p *policy.Policy) error {
	return checkInterfaces(p, netlinkLinks{})
}

func checkInterfaces(p *policy.Policy, links Links) error {
	var errs []error
	for i, it := range p.Interfaces {
		field := fmt.Sprintf("interfaces[%d].name", i)
		if it.Name == policy.DefaultRouteInterface {
			if _, err := links.DefaultRoute(); err != nil {
				errs = append(errs, p.ErrorAt(field, "%v (the daemon waits for one)", err))
			}
			continue
		}
		if _, ok := links.Index(it.Name); !ok {
			errs = append(errs, p.ErrorAt(field, "interface %q does not exist here (the daemon waits for it)", it.Name))
		}
	}
	return errors.Join(errs...)
}

// linkBytes reads an interface's received and sent bytes by name
// (netlink, in the daemon's namespace): the coop controller's bound on
// the goodput its safety fallback judges by (coop.IfaceCounter).
type linkBytes string

func (name linkBytes) InterfaceBytes() (rx, tx uint64, err error) {
	l, err := netlink.LinkByName(string(name))
	if err != nil {
		return 0, 0, err
	}
	st := l.Attrs().Statistics
	if st == nil {
		return 0, 0, fmt.Errorf("%s: no statistics", name)
	}
	return st.RxBytes, st.TxBytes, nil
}
