// account_test.go: the account status reads (FgYield.Accounts) after real
// traffic on a veth pair.
package datapath

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// TestAccountAfterBackgroundUpload: an unheld background upload gives its
// interface an upload capacity estimate, the queue there is untested (no
// foreground: free), and a harm stamped on the upload direction reads as
// held by harm in that direction alone.
func TestAccountAfterBackgroundUpload(t *testing.T) {
	p, h, idx, _, ok := backgroundUploadGrown(t, 9417)
	if !ok {
		return
	}
	link := idx[p.LinkA]
	var a [2]LinkAccount
	start := time.Now()
	for a[yield.Up].CapacityBps == 0 {
		if time.Since(start) > testutil.Patience(5*time.Second) {
			t.Fatalf("no capacity estimate for %s after %v: %+v", p.LinkA, time.Since(start), a)
		}
		time.Sleep(20 * time.Millisecond)
		a = readAccount(t, h, link)
	}
	t.Logf("%s: capacity estimate %.1f Mbit/s", p.LinkA, float64(a[yield.Up].CapacityBps)/1e6)
	if a[yield.Up].Owner != OwnerUntested || a[yield.Up].Held || a[yield.Up].Why != WhyFree {
		t.Errorf("no foreground: account %+v, want untested, not held, free", a[yield.Up])
	}
	stop := stampHarm(t, h, link, yield.Up)
	defer stop()
	if a = readAccount(t, h, link); !a[yield.Up].Held || a[yield.Down].Held {
		t.Errorf("harm stamped on the upload: held up %v, down %v; want up alone", a[yield.Up].Held, a[yield.Down].Held)
	}
	if a[yield.Up].Why != WhyHarm || a[yield.Down].Why == WhyHarm {
		t.Errorf("harm stamped on the upload: why up %q, down %q; want %q up alone", a[yield.Up].Why, a[yield.Down].Why, WhyHarm)
	}
}

// readAccount is interface link's account.
func readAccount(t *testing.T, h *Host, link int) [2]LinkAccount {
	t.Helper()
	all, err := h.Yield.Accounts()
	if err != nil {
		t.Fatal(err)
	}
	return all[link]
}

// TestRaiseUploadRateOnlyRaises: the QUIC/UDP class's measured upload
// link raises the interface's capacity estimate (lanes_link_rate) as a
// socket's rate does; a lower one leaves it.
func TestRaiseUploadRateOnlyRaises(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openTwoEgress(t, p.A, p.LinkA)
	var lr struct{ Bps, At uint64 }
	for _, c := range []struct{ raise, want uint64 }{{50_000, 50_000}, {10_000, 50_000}, {80_000, 80_000}} {
		if err := h.Background.RaiseUploadRate(idx[p.LinkA], c.raise); err != nil {
			t.Fatal(err)
		}
		if err := h.ops.LanesLinkRate.Lookup(uint32(idx[p.LinkA]), &lr); err != nil || lr.Bps != c.want {
			t.Errorf("raised by %d B/s: estimate %+v (%v), want %d", c.raise, lr, err, c.want)
		}
	}
}
