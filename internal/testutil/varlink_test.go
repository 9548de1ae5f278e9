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
	time.Sleep(2*varlink.Step + varlink.Step/2)
	if err := v.Restart(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(varlink.Step + varlink.Step/2)
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	steps := v.Steps()
	var after []RateStep
	for i := 1; i < len(steps); i++ {
		if steps[i].Bps == steps[0].Bps && i >= 3 {
			after = steps[i:]
			break
		}
	}
	if len(after) < 2 || after[1].Bps != steps[1].Bps {
		t.Fatalf("rates %v: want the sequence's first two again after the restart", steps)
	}
}
