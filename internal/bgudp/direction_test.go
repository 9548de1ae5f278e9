// direction_test.go: the episode's choice of the controlled direction,
// stepped on a fake datapath's counters beside a fluid bottleneck per
// direction.
package bgudp

import (
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/yield"
)

// fakeDP is the class's counters and the rates set, per direction.
type fakeDP struct {
	cls     [2]datapath.BgClass
	rates   [2]uint64
	held    bool            // BgClassHeld: the classifier holds the class
	present bool            // Foreground: present
	quiet   bool            // Foreground: quiet
	marks   int             // MarkBgActive calls
	harms   []time.Duration // MarkOwnHarm's queues
	// the interface's shaper (shape_test.go): none unless hasShaper
	hasShaper bool
	shapeRate uint64           // its rate (0: not shaped)
	shapeSent uint64           // bytes it sent
	shapeQ    float64          // bytes waiting in it
	shapeDrop uint64           // packets it dropped
	refuses   bool             // its stats say the kernel refuses it (datapath.ErrIfbRefuses)
	sent      uint64           // the interface's bytes sent, every lane's (0: not known)
	raised    uint64           // the upload capacity last given to the account (RaiseUploadRate)
	other     [2]time.Duration // DirectionQueue by direction (0: none read)
	acks      [2]bool          // SetBgAcks by direction
}

func (f *fakeDP) BgEvents() (<-chan datapath.BgEvent, func(), error) { return nil, func() {}, nil }
func (f *fakeDP) BgClass(_ int, d datapath.Direction) (datapath.BgClass, error) {
	return f.cls[d], nil
}
func (f *fakeDP) SetBgRate(_ int, d datapath.Direction, bytes uint64, _ bool) error {
	f.rates[d] = bytes
	return nil
}
func (f *fakeDP) BgClassHeld(int, datapath.Direction) bool        { return f.held }
func (f *fakeDP) BackgroundFlows() ([]datapath.BgFlow, error)     { return nil, nil }
func (f *fakeDP) Foreground(int, datapath.Direction) (bool, bool) { return f.present, f.quiet }
func (f *fakeDP) MarkBgActive()                                   { f.marks++ }
func (f *fakeDP) DirectionQueue(_ int, d datapath.Direction, _ time.Duration) (time.Duration, bool) {
	return f.other[d], f.other[d] != 0
}
func (f *fakeDP) MarkOwnHarm(_ int, q time.Duration)                   { f.harms = append(f.harms, q) }
func (f *fakeDP) OwnSocket(syscall.Conn) (func(), error)               { return func() {}, nil }
func (f *fakeDP) SetBgYieldRate(int, datapath.Direction, uint64) error { return nil }
func (f *fakeDP) SetBgAcks(_ int, d datapath.Direction, acks bool) error {
	f.acks[d] = acks
	return nil
}
func (f *fakeDP) SetBgShape(_ int, d datapath.Direction, bytes uint64) error {
	if !f.hasShaper || d == datapath.Download { // the upload's shaper only
		return errors.New("no shaper")
	}
	f.shapeRate = bytes
	return nil
}
func (f *fakeDP) RaiseUploadRate(_ int, bytes uint64) error {
	f.raised = bytes
	return nil
}
func (f *fakeDP) LinkBytes(int) (uint64, uint64, error) {
	if f.sent == 0 {
		return 0, 0, errors.New("no counters")
	}
	return f.sent, 0, nil
}
func (f *fakeDP) BgShapeStats(_ int, d datapath.Direction) (datapath.LaneStats, error) {
	if !f.hasShaper || d == datapath.Download {
		return datapath.LaneStats{}, errors.New("no shaper")
	}
	if f.refuses {
		return datapath.LaneStats{}, datapath.ErrIfbRefuses
	}
	return datapath.LaneStats{Bytes: f.shapeSent, BacklogBytes: uint64(f.shapeQ), Drops: f.shapeDrop}, nil
}

// dirSim is an episode on fakeDP, each direction through the policer into
// its own bottleneck of rate link (bytes/s).
type dirSim struct {
	dp    *fakeDP
	e     *episode
	link  float64
	queue [2]float64 // bytes
	prev  [2]datapath.BgClass
	log   *slog.Logger
}

func newDirSim(link float64) *dirSim {
	return &dirSim{dp: &fakeDP{}, link: link, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		e: &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(10 * time.Millisecond)}}}
}

// step offers offer (bytes/s, by direction) for one step and steps the
// controller on the counters and the larger queue's delay.
func (s *dirSim) step(t *testing.T, offer [2]float64) {
	dt := s.e.state.Rule.Interval
	var qd time.Duration
	for i := range 2 {
		pass := offer[i]
		if r := s.dp.rates[i]; r != 0 {
			pass = min(pass, float64(r))
		}
		s.queue[i] = max(0, s.queue[i]+(pass-s.link)*dt.Seconds())
		qd = max(qd, time.Duration(s.queue[i]/s.link*float64(time.Second)))
		c := &s.dp.cls[i]
		if b := offer[i] * dt.Seconds(); b > 0 {
			c.Bytes, c.Packets = c.Bytes+uint64(b), c.Packets+uint64(b/1200)+1
			c.DropBytes += uint64((offer[i] - pass) * dt.Seconds())
		}
	}
	in := Input{Signal: true, Queue: qd, Raw: qd, Base: 20 * time.Millisecond, Dt: dt}
	cur := s.dp.cls
	if err := s.e.control(s.dp, s.log, &in, false, s.prev, cur, s.e.state.Rule.Target); err != nil {
		t.Fatal(err)
	}
	s.prev = cur
}

// A policed upload whose sender pauses for a step (a loss-based sender's
// cut, an app's pause) carries less in it than the download's ACKs: the
// upload stays the controlled direction and policed.
func TestUploadStaysPolicedThroughAStall(t *testing.T) {
	s := newDirSim(1.25e6)
	const ack = 30_000 // the download's ACKs, bytes/s
	stalls := map[int]bool{200: true, 300: true, 301: true, 302: true}
	policed := false
	for n := range 400 {
		up := 2 * s.link // a sender that fills any buffer
		if stalls[n] {
			up = 10_000 // 500 bytes in the step: fewer than the ACKs' 1500
		}
		s.step(t, [2]float64{up, ack})
		if policed && s.dp.rates[datapath.Upload] == 0 {
			t.Fatalf("step %d (stall %v): upload left unpoliced, controlled %s", n, stalls[n], s.e.Controlled)
		}
		policed = policed || s.dp.rates[datapath.Upload] != 0
		if policed && s.e.Controlled != datapath.Upload.String() {
			t.Fatalf("step %d: controlled %s, the upload carries the bulk", n, s.e.Controlled)
		}
	}
	if !policed {
		t.Fatal("upload never policed")
	}
	t.Logf("upload rate %d B/s, link estimated %d B/s", s.dp.rates[datapath.Upload], s.e.Link)
}

// The direction opposite the class's data carries only its
// acknowledgments (a few percent of its bytes): it is marked so, and the
// yield holds the data's direction, not them. Where both directions carry
// data, neither is marked.
func TestAcksMarkedOppositeTheData(t *testing.T) {
	for _, c := range []struct {
		name  string
		offer [2]float64 // bytes/s, by direction
		want  [2]bool
	}{
		{"download", [2]float64{40_000, 2.5e6}, [2]bool{true, false}},
		{"upload", [2]float64{2.5e6, 40_000}, [2]bool{false, true}},
		{"both ways", [2]float64{2.5e6, 0.6e6}, [2]bool{false, false}},
	} {
		s := newDirSim(1.25e6)
		for range 100 {
			s.step(t, c.offer)
		}
		if s.dp.acks != c.want {
			t.Errorf("%s: acks marked %v (upload, download), want %v", c.name, s.dp.acks, c.want)
		}
	}
}

// An upload that ends and a download that starts: the download is
// controlled within a few steps and policed, the ended upload's rate
// released once it is idle.
func TestDirectionFollowsANewDownload(t *testing.T) {
	s := newDirSim(1.25e6)
	for range 200 {
		s.step(t, [2]float64{2 * s.link, 30_000})
	}
	if s.dp.rates[datapath.Upload] == 0 {
		t.Fatal("upload never policed")
	}
	took := -1
	for n := range 200 {
		s.step(t, [2]float64{0, 2 * s.link})
		if took < 0 && s.e.Controlled == datapath.Download.String() {
			took = n
		}
	}
	t.Logf("download controlled after %d steps, rate %d B/s", took, s.dp.rates[datapath.Download])
	if took < 0 || took > 10 {
		t.Errorf("download controlled after %d steps, want within 10", took)
	}
	if s.dp.rates[datapath.Download] == 0 {
		t.Error("download not policed")
	}
	if s.dp.rates[datapath.Upload] != 0 {
		t.Errorf("idle upload still policed at %d B/s", s.dp.rates[datapath.Upload])
	}
}

// Beside a present foreground (sharing) the class's own queue above
// yield.HarmQueue is marked as the foreground's harm (MarkOwnHarm: the
// datapath stamps it where no TCP sample speaks for the foreground); with
// no foreground it is not.
func TestOwnQueueMarksHarmBesideForeground(t *testing.T) {
	for _, present := range []bool{false, true} {
		s := newDirSim(1.25e6)
		s.dp.present = present
		for range 50 {
			s.step(t, [2]float64{2 * s.link, 0})
		}
		if present == (len(s.dp.harms) == 0) {
			t.Errorf("foreground present %v: %d harm marks, want them only beside a foreground", present, len(s.dp.harms))
		}
		for _, q := range s.dp.harms {
			if q <= yield.HarmQueue {
				t.Errorf("harm marked at a queue of %v, not above %v", q, yield.HarmQueue)
			}
		}
	}
}

// A shaper the kernel refuses to deliver from (an IFB on Linux 5.10,
// datapath.ErrIfbRefuses) is given up at its first such read: it is
// unset and the policer holds the direction.
func TestRefusedShaperFallsBackToThePolicer(t *testing.T) {
	s := newDirSim(1.25e6)
	s.dp.hasShaper = true
	for range 40 {
		s.step(t, [2]float64{2.5e6, 0})
	}
	if s.dp.shapeRate == 0 || !s.e.Shaped {
		t.Fatalf("an upload at twice the link not shaped (shaper %d B/s)", s.dp.shapeRate)
	}
	s.dp.refuses = true
	for range 3 {
		s.step(t, [2]float64{2.5e6, 0})
	}
	if s.dp.shapeRate != 0 || s.e.Shaped || s.dp.rates[datapath.Upload] == 0 {
		t.Errorf("after the refusal: shaper %d B/s, shaped %v, policer %d B/s; want the shaper unset and the policer set",
			s.dp.shapeRate, s.e.Shaped, s.dp.rates[datapath.Upload])
	}
}

// An echo crosses both directions: the class in one direction takes the
// other's queue, as a foreground socket's timestamps read it, off its
// probes' (a bulk upload's 300 ms is not the download's queue), and grows;
// with BothWays (the lab switch) it reads the whole and is cut. A
// direction whose opposite no socket read keeps the probes' queue.
func TestOtherDirectionsQueueTakenOff(t *testing.T) {
	const other, own = 300 * time.Millisecond, 2 * time.Millisecond
	for _, c := range []struct {
		name     string
		d        datapath.Direction
		bothWays bool
		want     time.Duration
	}{
		{"download beside an upload's queue", datapath.Download, false, own},
		{"download, both ways (lab switch)", datapath.Download, true, other + own},
		{"upload, the download's queue not read", datapath.Upload, false, other + own},
	} {
		dp := &fakeDP{other: [2]time.Duration{datapath.Upload: other}}
		e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(10 * time.Millisecond)}}
		e.state.Rule.Off.BothWays = c.bothWays
		e.state.Rate, e.state.Link = 500_000, 700_000
		in := Input{Signal: true, Queue: other + own, Raw: other + own, Least: other + own, Spoke: 1,
			Offered: 500_000, Passed: 500_000, Dt: e.state.Rule.Interval}
		e.ownDirection(dp, &in, c.d)
		rate := e.state.Step(in)
		if in.Queue != c.want || in.Raw != c.want || in.Least != c.want {
			t.Errorf("%s: queue %v raw %v least %v, want %v", c.name, in.Queue, in.Raw, in.Least, c.want)
		}
		if grew := rate > 500_000; grew != (c.want == own) {
			t.Errorf("%s: rate 500000 -> %d at queue %v", c.name, rate, in.Queue)
		}
	}
}
