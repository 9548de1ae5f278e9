package daemon

import (
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/datapath"
)

// The status line says what bounds the class: beside other lanes' arrivals,
// the room they leave of the measured link, not only the link.
func TestEpisodeLineSaysTheRoom(t *testing.T) {
	e := bgudp.Episode{Ifindex: 1, Controlled: datapath.Download.String(), Rate: 725_000, Link: 1_250_000, Measured: 700_000}
	if line := episodeLine(e); strings.Contains(line, "other lanes leave") {
		t.Errorf("no room, yet the line says one: %s", line)
	}
	e.Room = 750_000
	line := episodeLine(e)
	for _, want := range []string{"held at 5.8 Mbit/s by the delay controller", "(0.58 of the link estimate)", "within the 6 Mbit/s the other lanes leave"} {
		if !strings.Contains(line, want) {
			t.Errorf("the line lacks %q: %s", want, line)
		}
	}
}

// A class held under its measured link says so, and why: its sender waits
// on the shaper.
func TestEpisodeLineSaysUnderTheLink(t *testing.T) {
	e := bgudp.Episode{Ifindex: 1, Controlled: datapath.Upload.String(), Rate: 1_225_000, Link: 1_250_000, Measured: 1_225_000, Shaped: true}
	if line := episodeLine(e); strings.Contains(line, "under its measured link") {
		t.Errorf("steered by the target, yet the line says held under the link: %s", line)
	}
	e.UnderLink = true
	if line := episodeLine(e); !strings.Contains(line, "by the delay controller under its measured link, the queue drained (its sender waits on the shaper") {
		t.Errorf("the line does not say the class is held under its link: %s", line)
	}
}
