// params_test.go tests the pure parts of the datapath: config validation
// and the numbers the HTB tree is built from.
package datapath

import (
	"errors"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/lane"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // error substring, "" = ok
	}{
		{Config{Interface: "eth0", Instance: "ns4026531840"}, ""},
		{Config{Interface: "eth0", Instance: "a", Mode: Shaped, UplinkBps: 10_000_000}, ""},
		{Config{Instance: "a"}, "no interface"},
		{Config{Interface: "eth0"}, "instance"},
		{Config{Interface: "eth0", Instance: "a/b"}, "instance"},
		{Config{Interface: "eth0", Instance: strings.Repeat("x", 41)}, "instance"},
		{Config{Interface: "eth0", Instance: "a", Mode: Shaped}, "uplink"},
		{Config{Interface: "eth0", Instance: "a", Mode: Mode(7)}, "mode"},
	} {
		err := tc.cfg.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestTreeParams(t *testing.T) {
	p := paramsFor(EgressConfig{Mode: Shaped, UplinkBps: 10_000_000})
	if p.rootBytes != 1_187_500 { // 95% of 10 Mbit/s in bytes/s
		t.Errorf("shaped root rate %d B/s", p.rootBytes)
	}
	if p.floorBytes != 0 {
		t.Errorf("floor %d, want 0 (strict)", p.floorBytes)
	}
	if p.limits[lane.Interactive] != 237_500 || p.limits[lane.Realtime] != 59_375 {
		t.Errorf("limits %v, want 200 ms and 50 ms of the rate", p.limits)
	}
	p = paramsFor(EgressConfig{Mode: Shaped, UplinkBps: 1_000_000, BackgroundFloorBps: 5_000_000})
	if p.floorBytes != p.rootBytes {
		t.Errorf("floor above the root rate not clamped: %d > %d", p.floorBytes, p.rootBytes)
	}
	if p.limits[lane.Background] != 64<<10 {
		t.Errorf("small-rate limit %d, want the 64 KiB minimum", p.limits[lane.Background])
	}
	p = paramsFor(EgressConfig{})
	if p.rootBytes*8 != bottleneckBps {
		t.Errorf("device-bottleneck root rate %d B/s", p.rootBytes)
	}
	if burst(100) != 2*wireMTU || burst(1_250_000_000) != 2_500_000 {
		t.Errorf("burst: %d %d", burst(100), burst(1_250_000_000))
	}
	if leafHandle(lane.Background) != 0x130000 {
		t.Errorf("leaf handle %#x, want 13:", leafHandle(lane.Background))
	}
}

func TestFlowKey(t *testing.T) {
	f := FlowKey{Dst: netip.MustParseAddr("::ffff:10.0.0.2"), DPort: 443, SPort: 5000, Proto: 6}
	k, err := f.key()
	if err != nil {
		t.Fatal(err)
	}
	if k.Addr() != netip.MustParseAddr("10.0.0.2") || k.Daddr[10] != 0xff || k.Dport != 443 || k.Sport != 5000 {
		t.Errorf("key %+v", k)
	}
	if s := f.String(); s != "10.0.0.2:443 sport 5000 proto 6" {
		t.Errorf("String() = %q", s)
	}
	if _, err := (FlowKey{}).key(); err == nil {
		t.Error("key without destination accepted")
	}
	f.Src = netip.MustParseAddr("::ffff:10.0.0.1")
	if k, err = f.key(); err != nil || k.Src() != netip.MustParseAddr("10.0.0.1") || k.Saddr[10] != 0xff {
		t.Errorf("with a local address: key %+v, %v", k, err)
	}
	if s := f.String(); s != "10.0.0.2:443 sport 5000 src 10.0.0.1 proto 6" {
		t.Errorf("String() = %q", s)
	}
	f.Src = netip.MustParseAddr("fd00::1")
	if _, err := f.key(); err == nil {
		t.Error("IPv6 local address with an IPv4 destination accepted")
	}
	// the datapath's precedence (lanes_abi.h flow_lookup)
	f.Src = netip.MustParseAddr("10.0.0.1")
	l := f.Lookups()
	if l[0] != f || l[1].Src.IsValid() || l[1].Proto != 6 || l[2].Src != f.Src || l[2].Proto != 0 || l[3].Src.IsValid() || l[3].Proto != 0 {
		t.Errorf("lookups %v", l)
	}
}

// TestBQLFiles runs the BQL save/set/restore on a fake sysfs tree (no
// device here has BQL that a test may touch: veth has none).
func TestBQLFiles(t *testing.T) {
	sys := t.TempDir()
	for _, q := range []string{"tx-0", "tx-1"} {
		dir := filepath.Join(sys, "class/net/eth9/queues", q, "byte_queue_limits")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "limit_max"), []byte("1879048192\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := &devQueueState{Interface: "eth9", BQLLimit: map[string]int{}}
	f := filepath.Join(sys, "class/net/eth9/queues/tx-1/byte_queue_limits/limit_max")
	// The state is saved before any limit is written (a crash in between
	// must not lose the values to restore), and a failed save stops it.
	refuse := errors.New("disk full")
	if err := setBQL(sys, "eth9", 1514, st, func(*devQueueState) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("failed save: %v", err)
	}
	if v, _ := readInt(f); v != 1879048192 {
		t.Fatalf("limit_max changed to %d although saving the state failed", v)
	}
	var saved map[string]int
	save := func(s *devQueueState) error {
		if v, _ := readInt(f); v != 1879048192 {
			t.Errorf("state saved after the device changed (limit_max %d)", v)
		}
		saved = maps.Clone(s.BQLLimit)
		return nil
	}
	if err := setBQL(sys, "eth9", 1514, st, save); err != nil {
		t.Fatal(err)
	}
	if saved["tx-0"] != 1879048192 || saved["tx-1"] != 1879048192 {
		t.Errorf("state saved before the change: %v", saved)
	}
	if len(st.BQLLimit) != 2 || st.BQLLimit["tx-1"] != 1879048192 {
		t.Errorf("saved %v", st.BQLLimit)
	}
	if v, _ := readInt(f); v != 1514 {
		t.Errorf("limit_max %d after set, want 1514", v)
	}
	if err := restoreBQL(sys, st); err != nil {
		t.Fatal(err)
	}
	if v, _ := readInt(f); v != 1879048192 {
		t.Errorf("limit_max %d after restore", v)
	}
}
