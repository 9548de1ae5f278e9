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
