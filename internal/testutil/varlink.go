// varlink.go: a variable-rate link for the remote-bottleneck tests. A TBF
// at a router's egress whose rate steps every 500 ms through a seeded
// sequence between 1.5 and 16 Mbit/s (the lab's, internal/lab/varlink's
// Rates), as a cellular link's does, and the time-weighted mean
// of the rates set over any window (the link's mean capacity there).
package testutil

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/varlink"
	"github.com/vishvananda/netlink"
)

// The variable link's shape. The limit is the same in bytes at every rate
// (a base station's or modem's per-user buffer is sized in bytes): 600 KB,
// the remote tests' fixed-link buffer, 300 ms at 16 Mbit/s and 3.2 s at
// 1.5. The bucket holds 15 KB at every rate.
const (
	varLinkLimit    = 600_000
	varLinkBucket   = 15_000
	varLinkHandleID = 0x1
)

// RateStep is one rate the variable link set and when the change returned.
type RateStep struct {
	At  time.Time
	Bps float64
}

// VariableLink is a TBF on one device whose rate a goroutine changes by
// netlink every varlink.Step until Stop.
type VariableLink struct {
	h     *netlink.Handle
	qdisc *netlink.Tbf
	seed  uint64
	next  func() float64 // the sequence's next rate, bit/s
	stop  chan struct{}
	again chan chan error // Restart's requests
	done  chan struct{}
	once  sync.Once

	mu    sync.Mutex
	steps []RateStep
	err   error
}

// StartVariableLink puts the variable link's TBF as the root qdisc of dev
// in ns and steps its rate from seed's sequence until the test ends (or
// Stop). A failed change fails the test at Stop.
func StartVariableLink(t testing.TB, ns *NetNS, dev string, seed uint64) *VariableLink {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		t.Fatalf("netlink in %s: %v", ns.Name, err)
	}
	link, err := h.LinkByName(dev)
	if err != nil {
		h.Close()
		t.Fatalf("variable link: %s in %s: %v", dev, ns.Name, err)
	}
	v := &VariableLink{h: h, seed: seed, next: varlink.Rates(seed),
		stop: make(chan struct{}), again: make(chan chan error), done: make(chan struct{}),
		qdisc: &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
			Handle: netlink.MakeHandle(varLinkHandleID, 0), Parent: netlink.HANDLE_ROOT},
			Limit: varLinkLimit}}
	if err := v.set(h.QdiscReplace); err != nil {
		h.Close()
		t.Fatalf("variable link on %s: %v", dev, err)
	}
	t.Cleanup(func() {
		if err := v.Stop(); err != nil {
			t.Errorf("variable link: %v", err)
		}
	})
	go v.run()
	return v
}

// set applies the sequence's next rate with op and records it.
func (v *VariableLink) set(op func(netlink.Qdisc) error) error {
	bps := v.next()
	v.qdisc.Rate = uint64(bps / 8)
	v.qdisc.Buffer = netlink.Xmittime(v.qdisc.Rate, varLinkBucket)
	if err := op(v.qdisc); err != nil {
		return fmt.Errorf("tbf at %.2f Mbit/s: %w", bps/1e6, err)
	}
	v.mu.Lock()
	v.steps = append(v.steps, RateStep{At: time.Now(), Bps: bps})
	v.mu.Unlock()
	return nil
}

func (v *VariableLink) run() {
	defer close(v.done)
	tick := time.NewTicker(varlink.Step)
	defer tick.Stop()
	for {
		select {
		case <-v.stop:
			return
		case reply := <-v.again:
			v.next = varlink.Rates(v.seed)
			err := v.set(v.h.QdiscChange)
			tick.Reset(varlink.Step)
			reply <- err
		case <-tick.C:
			if err := v.set(v.h.QdiscChange); err != nil {
				v.mu.Lock()
				v.err = err
				v.mu.Unlock()
				return
			}
		}
	}
}

// Restart begins the sequence again from its first rate, set now: a
// measurement that starts here covers the same rates in every run,
// wherever the set-up before it left the sequence.
func (v *VariableLink) Restart() error {
	reply := make(chan error)
	select {
	case v.again <- reply:
		return <-reply
	case <-v.done:
		return fmt.Errorf("variable link stopped")
	}
}

// Stop ends the stepping (the TBF stays at its last rate until its
// namespace goes) and returns the first failed change, if any.
func (v *VariableLink) Stop() error {
	v.once.Do(func() {
		close(v.stop)
		<-v.done
		v.h.Close()
	})
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// Steps is a copy of the rates set so far.
func (v *VariableLink) Steps() []RateStep {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]RateStep(nil), v.steps...)
}

// MeanBps is the time-weighted mean of the rates in force from from to to.
func (v *VariableLink) MeanBps(from, to time.Time) float64 {
	return MeanRate(v.Steps(), from, to)
}

// MeanRate is the time-weighted mean of steps' rates over [from, to]:
// each rate holds from its step's time to the next step's.
func MeanRate(steps []RateStep, from, to time.Time) float64 {
	var sum, secs float64
	for i, s := range steps {
		end := to
		if i+1 < len(steps) && steps[i+1].At.Before(to) {
			end = steps[i+1].At
		}
		begin := s.At
		if begin.Before(from) {
			begin = from
		}
		if d := end.Sub(begin).Seconds(); d > 0 {
			sum += s.Bps * d
			secs += d
		}
	}
	if secs == 0 {
		return 0
	}
	return sum / secs
}
