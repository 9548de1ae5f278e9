// varlink_test.go: the variable link's mean and its steps on a real TBF.
package testutil

import (
	"math"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/varlink"
	"github.com/vishvananda/netlink"
)

func TestMeanRateWeighsEachRateByItsTime(t *testing.T) {
	t0 := time.Unix(100, 0)
	steps := []RateStep{{t0, 2e6}, {t0.Add(time.Second), 8e6}, {t0.Add(3 * time.Second), 4e6}}
	for _, c := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, 3 * time.Second, (2e6 + 2*8e6) / 3},
		{500 * time.Millisecond, 2 * time.Second, (0.5*2e6 + 8e6) / 1.5},
		{2 * time.Second, 5 * time.Second, (8e6 + 2*4e6) / 3},
		{-time.Second, time.Second, 2e6}, // before the first step: no rate known
	} {
		got := MeanRate(steps, t0.Add(c.from), t0.Add(c.to))
		if math.Abs(got-c.want) > 1 {
			t.Errorf("mean over %v..%v: %.0f, want %.0f", c.from, c.to, got, c.want)
		}
	}
}

func TestVariableLinkStepsTheTBF(t *testing.T) {
	RequireRoot(t)
	ns := NewNetNS(t)
	v := StartVariableLink(t, ns, "lo", 7)
	time.Sleep(3*varlink.Step + varlink.Step/2)
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	var rate uint64
	ns.Do(t, func() error {
		qs, err := netlink.QdiscList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", Index: 1}})
		for _, q := range qs {
			if tbf, ok := q.(*netlink.Tbf); ok {
				rate = tbf.Rate
			}
		}
		return err
	})
	steps := v.Steps()
	if len(steps) < 3 {
		t.Fatalf("%d steps in 1.75 s; want >= 3", len(steps))
	}
	for _, s := range steps {
		if s.Bps < varlink.MinBps || s.Bps > varlink.MaxBps {
			t.Errorf("rate %.2f Mbit/s outside the link's range", s.Bps/1e6)
		}
	}
	if last := steps[len(steps)-1].Bps; math.Abs(float64(rate)*8-last) > 8 {
		t.Errorf("TBF at %d B/s, last step %.0f bit/s", rate, last)
	}
	same := StartVariableLink(t, NewNetNS(t), "lo", 7)
	_ = same.Stop()
	if got := same.Steps()[0].Bps; got != steps[0].Bps {
		t.Errorf("seed 7 began at %.0f then %.0f: not one sequence", steps[0].Bps, got)
	}
}

// Restart begins the sequence again: the rates after it are the first
// ones, in order.
func TestVariableLinkRestart(t *testing.T) {
	RequireRoot(t)
	v := StartVariableLink(t, NewNetNS(t), "lo", 7)
	waitSteps(t, v, 3)
	if err := v.Restart(); err != nil {
		t.Fatal(err)
	}
	n := len(v.Steps()) - 1 // the restart's step: Restart returns once it is set
	waitSteps(t, v, n+2)
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	steps := v.Steps()
	if steps[n].Bps != steps[0].Bps || steps[n+1].Bps != steps[1].Bps {
		t.Fatalf("rates %v, the restart at %d: want the sequence's first two again", steps, n)
	}
}

// waitSteps waits until v has set at least n rates (at most 10 s).
func waitSteps(t *testing.T, v *VariableLink, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(v.Steps()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d rates set in 10 s, want %d", len(v.Steps()), n)
		}
		time.Sleep(varlink.Step / 10)
	}
}
