package bgudp

import (
	"testing"
	"time"
)

// fluid is a bottleneck of rate link (bytes/s) with a queue, fed by a
// sender that sends at the policer's rate when it has one, else at 2× the
// link (a sender that fills any buffer).
func fluid(t *testing.T, s *State, link float64, steps int) (maxQ time.Duration, tail float64) {
	t.Helper()
	base := 20 * time.Millisecond
	queue := 0.0 // bytes
	for i := 0; i < steps; i++ {
		send := 2 * link
		if s.Rate != 0 {
			send = float64(s.Rate)
		}
		dt := s.Rule.Interval.Seconds()
		queue = max(0, queue+(send-link)*dt)
		qd := time.Duration(queue / link * float64(time.Second))
		if i > steps/2 {
			maxQ = max(maxQ, qd)
			tail += min(send, link) / link
		}
		s.Step(base+qd, uint64(send), false)
	}
	return maxQ, tail / float64(steps-steps/2-1)
}

func TestRuleHoldsTheQueueNearTheTarget(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	maxQ, share := fluid(t, s, 1.25e6, 600)
	t.Logf("queue at most %v over the second half, link used %.0f%%, rate %d B/s", maxQ, 100*share, s.Rate)
	if maxQ > 25*time.Millisecond {
		t.Errorf("queue reached %v, want <= 25ms", maxQ)
	}
	if share < 0.7 {
		t.Errorf("link used %.0f%%, want >= 70%%", 100*share)
	}
}

func TestRuleLeavesTrafficWithoutQueueAlone(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	for i := 0; i < 100; i++ {
		if r := s.Step(20*time.Millisecond+time.Duration(i%3)*time.Millisecond, 1e6, false); r != 0 {
			t.Fatalf("step %d set rate %d with no queue", i, r)
		}
	}
}

func TestRuleFreezesWhileHeld(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	s.Step(20*time.Millisecond, 1e6, false)
	s.Step(80*time.Millisecond, 1e6, false)
	r := s.Step(80*time.Millisecond, 1e6, false) // the current delay: two samples
	if r == 0 {
		t.Fatal("no rate after a queue")
	}
	for i := 0; i < 10; i++ {
		if got := s.Step(20*time.Millisecond, 25_000, true); got != r {
			t.Fatalf("held: rate moved %d -> %d", r, got)
		}
	}
}

func TestRuleLostProbeIsQueue(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	s.Step(20*time.Millisecond, 1e6, false)
	s.Step(0, 1e6, false)
	if r := s.Step(0, 1e6, false); r == 0 || r >= 1e6 {
		t.Errorf("a lost probe set rate %d, want below the measured 1e6", r)
	}
}
