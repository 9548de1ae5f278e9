package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/udpflow"
)

func TestUDPFilter(t *testing.T) {
	quic := udpflow.Flow{Src: "[::]:4000", Dst: "*:*", Remotes: []string{"10.0.0.2:4433"}, State: "unconnected", Lane: lane.Background, PID: 5, Comm: "q"}
	echo := udpflow.Flow{Src: "10.0.0.1:5000", Dst: "10.0.0.2:7", State: "connected", Lane: lane.Interactive}
	for _, c := range []struct {
		f          udpFilter
		quic, echo bool
	}{
		{udpFilter{}, true, true},
		{udpFilter{lanes: []lane.Lane{lane.Background}}, true, false},
		{udpFilter{dport: 4433}, true, false},
		{udpFilter{port: 7}, false, true},
		{udpFilter{port: 4000}, true, false},
		{udpFilter{sport: 5000}, false, true},
		{udpFilter{remote: netip.MustParsePrefix("10.0.0.2/32")}, true, true},
		{udpFilter{local: netip.MustParsePrefix("10.0.0.0/24")}, false, true},
		{udpFilter{comm: "q"}, true, false},
	} {
		if got := c.f.match(&quic); got != c.quic {
			t.Errorf("%+v on the QUIC flow: %v", c.f, got)
		}
		if got := c.f.match(&echo); got != c.echo {
			t.Errorf("%+v on the echo flow: %v", c.f, got)
		}
	}
}

func TestWriteUDPJSON(t *testing.T) {
	var b strings.Builder
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := writeUDPJSON(&b, at, []udpflow.Flow{{Proto: "udp", Src: "10.0.0.1:1", Dst: "*:*", Lane: lane.Background, Why: "cgroup x"}}); err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-01-02T03:04:05Z","proto":"udp","src":"10.0.0.1:1","dst":"*:*","state":"","uid":0,"recv_q_bytes":0,"send_q_bytes":0,"drops":0,"lane":"background","why":"cgroup x"}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s want %s", b.String(), want)
	}
}
