package daemon

import (
	"net/netip"
	"testing"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// TestJoinBackground: the class table's 5-tuples go to the socket bound to
// their local port (any address, or theirs), a connected socket only for
// its own remote, and the rest become records of their own.
func TestJoinBackground(t *testing.T) {
	key := func(src, dst string, sport uint16) datapath.FlowKey {
		d := netip.MustParseAddrPort(dst)
		return datapath.FlowKey{Src: netip.MustParseAddr(src), Dst: d.Addr(), DPort: d.Port(), SPort: sport, Proto: 17}
	}
	flows := []udpflow.Flow{
		{Cookie: 1, Src: "[::]:4000", Dst: "*:*", State: "unconnected", Lane: lane.Background},
		{Cookie: 2, Src: "10.0.0.1:5000", Dst: "10.0.0.2:7", State: "connected", Lane: lane.Interactive},
	}
	bg := []datapath.BgFlow{
		{Key: key("10.0.0.1", "10.0.0.2:4433", 4000), Ifindex: 3},
		{Key: key("10.0.0.1", "10.0.0.3:4433", 4000), Ifindex: 3},
		{Key: key("10.0.0.1", "10.0.0.9:7", 5000), Ifindex: 4}, // not the connected socket's remote
	}
	out := joinBackground(flows, bg, map[int]bool{3: true})
	if len(out) != 3 {
		t.Fatalf("%d records, want 3: %+v", len(out), out)
	}
	if q := out[0]; !q.BgClass || !q.BgHeld || len(q.Remotes) != 2 || q.Remotes[0] != "10.0.0.2:4433" {
		t.Errorf("unconnected socket: %+v", q)
	}
	if u := out[1]; u.BgClass || len(u.Remotes) != 0 {
		t.Errorf("connected socket took another remote's entry: %+v", u)
	}
	if r := out[2]; r.Cookie != 0 || r.State != "class table" || r.Src != "10.0.0.1:5000" || r.Dst != "10.0.0.9:7" || r.Lane != lane.Background || r.BgHeld {
		t.Errorf("unclaimed entry: %+v", r)
	}
}
