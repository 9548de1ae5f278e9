// dynamics_test.go: coop-dynamics' reaction times and phase medians from
// the daemons' samples (no root).
package coop

import (
	"math"
	"testing"
)

// twoHosts: a join at 10 s to N = 6; host 0 sees it at 50 ms, host 1 at
// 100 ms; their flows are all under the caps from 200 ms.
func twoHosts() *dynResult {
	return &dynResult{
		NT:       []float64{10.0, 10.05, 10.1, 10.15, 10.2},
		NSeen:    [][]int{{5, 5}, {6, 5}, {6, 6}, {6, 6}, {6, 6}},
		Caps:     [][]int{{50, 0}, {45, 50}, {40, 40}, {40, 40}, {40, 40}},
		UnderCap: [][]int8{{capUnder, capUnder}, {capAbove, capUnder}, {capAbove, capAbove}, {capUnder, capAbove}, {capUnder, capNoFlow}},
	}
}

func TestReaction(t *testing.T) {
	for _, c := range []struct {
		name                       string
		d                          *dynResult
		ev                         dynEvent
		period                     float64
		slow, fast, capMs, afterMs float64
	}{
		// host 0: under its cap 100 ms after it saw N; host 1: 100 ms
		// (no flow counts as under)
		{"join", twoHosts(), dynEvent{Kind: "join", At: 10, NewN: 6}, 1, 100, 50, 200, 100},
		{"leave: no cap times", twoHosts(), dynEvent{Kind: "leave", At: 10, NewN: 6}, 1, 100, 50, 0, 0},
		// the period ends before host 1 sees N: nothing is set
		{"not within the period", twoHosts(), dynEvent{Kind: "join", At: 10, NewN: 6}, 0.06, -1, -1, 0, 0},
		// every host sees N, the caps never hold within the period
		{"caps not reached", twoHosts(), dynEvent{Kind: "join", At: 10, NewN: 6}, 0.16, 100, 50, 0, 0},
		{"no samples", &dynResult{}, dynEvent{Kind: "join", At: 10, NewN: 6}, 1, -1, -1, 0, 0},
	} {
		e := c.ev
		e.Slowest, e.Fastest = -1, -1
		c.d.reaction(&e, c.period)
		for _, v := range []struct {
			what      string
			got, want float64
		}{{"slowest", e.Slowest, c.slow}, {"fastest", e.Fastest, c.fast}, {"cap", e.CapMs, c.capMs}, {"cap after N", e.CapAfterNMs, c.afterMs}} {
			if math.Abs(v.got-v.want) > 1e-6 {
				t.Errorf("%s: %s %v ms, want %v", c.name, v.what, v.got, v.want)
			}
		}
	}
}

func TestNSeen(t *testing.T) {
	d := twoHosts()
	for _, c := range []struct {
		from, to float64
		n, caps  string
	}{
		{0, 20, "6", "40"},    // N 5 5 5 6 6 6 6 6 6 6; caps 50 45 50 40 x6
		{9, 10.05, "5", "50"}, // N 5 5 6 5; caps 50 45 50
		{10.05, 10.1, "6", "40"},
		{11, 12, "-", "-"},
	} {
		n, caps := d.nSeen(c.from, c.to)
		if n != c.n || caps != c.caps {
			t.Errorf("nSeen(%v, %v) = %s, %s; want %s, %s", c.from, c.to, n, caps, c.n, c.caps)
		}
	}
}
