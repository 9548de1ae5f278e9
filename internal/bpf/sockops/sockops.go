// sockops.go loads the lanes sock_ops program with the maps it shares with
// the classifier and names its counters. Attaching it is the datapath's job.
package sockops

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
)

// Config is set into the program before load.
type Config struct {
	NetnsCookie uint64 // the network namespace whose sockets this instance manages
	// NetnsInode is the same namespace's inode number (nsfs), by which the
	// program matches it where NetnsCookie is 0 or sock_ops lacks
	// bpf_get_netns_cookie (HaveNetnsCookie).
	NetnsInode   uint32
	NotsentLowat uint32 // TCP_NOTSENT_LOWAT for background sockets, 0 = leave alone
	// CCName is the lanes congestion control (internal/bpf/capcc) that a
	// capped CUBIC socket is switched to; "" = leave every socket's alone.
	CCName string
	// BgCCName is the background lane's congestion control
	// (internal/bpf/ledbat: LEDBAT++) that every background TCP socket is
	// switched to; "" = leave background sockets' alone.
	BgCCName string
	// RLEDBATTargetUS is the queuing-delay target (µs) of rLEDBAT, which
	// limits background sockets' receive windows (rledbat.h); 0 = off.
	RLEDBATTargetUS uint32
	// BgClampTargetUS is LEDBAT++'s queuing-delay target (µs) for
	// background uploads where BgCCName is "" (no struct_ops): sock_ops
	// clamps their cwnd to LEDBAT++'s window (bgclamp.h); 0 = off.
	BgClampTargetUS uint32
	// Yield: the foreground-aware yield (internal/yield): background
	// sockets held at the minimum window while the classifier's stamp of
	// their interface's foreground is fresh, and for half a second after a
	// new foreground connection.
	Yield bool
	// UntoldHeld holds background at the minimum beside a present
	// foreground no TCP RTT sample speaks for (a call: UDP), instead of
	// letting it share by its own queuing delay (state.h's
	// YIELD_UNTOLD_HELD; a lab switch, to pair the rule with the hold it
	// replaced).
	UntoldHeld bool
	// DirectionsJoined: any foreground harm holds background both ways and
	// every delay is read from the RTT, no timestamps (state.h's
	// YIELD_JOINED; a lab switch, to pair directions apart with the rule
	// it replaced).
	DirectionsJoined bool
	// RateByACKs: the upload capacity estimate from its sockets' bytes
	// over their ACKs' arrival alone (state.h's YIELD_RATE_BY_ACKS; a lab
	// switch, to pair the estimate timing their sending too with the rule
	// it replaced).
	RateByACKs bool
	// RLShare is rLEDBAT beside a present, unharmed foreground: RLShareOn
	// and LEDBAT++'s share rule (ledbat.ShareRule's bits) to keep
	// FG_SHARE_TARGET of queue there; 0 holds the receive window at the
	// minimum there. Foreground downloads then read their harm on their
	// receive side (fgrcv.h) while a background download is active.
	RLShare uint32
	// BgClampShare is LEDBAT++'s share rule (ledbat.ShareRule's bits) for
	// the clamped background uploads (BgClampTargetUS) beside a present,
	// unharmed foreground, as the congestion control's; 0: the smaller
	// target alone.
	BgClampShare uint32
}

// state.h's YIELD_* bits of CFG.yield.
const (
	yieldOn         = 1
	yieldUntoldHeld = 2
	yieldJoined     = 4
	yieldRateByACKs = 8
)

// Shared are the classifier's maps (lanes_maps.h) that sock_ops reads and
// writes, by map name; see classifier.Shared.
type Shared map[string]*ebpf.Map

// CounterNames names the entries of lanes_ops_stats, by index: the names
// of enum ops_counter in lanes_abi.h ("connect", "cap_set", ...).
var CounterNames = abi.MustNames("ops_counter", "OPS_", "OPS_COUNTERS")

// HaveNetnsCookie reports whether sock_ops programs may call
// bpf_get_netns_cookie (Linux 5.15+); where they may not, Load has the
// program match its namespace by Config.NetnsInode.
func HaveNetnsCookie() bool {
	return features.HaveProgramHelper(ebpf.SockOps, asm.FnGetNetnsCookie) == nil
}

// HaveWindowClamp says whether sock_ops may set TCP_WINDOW_CLAMP with
// bpf_setsockopt (rLEDBAT): nil when the kernel's BTF has
// tcp_set_window_clamp, which the commit that allowed it added
// (Linux 5.11). `lanes doctor` asks the kernel itself
// (internal/features ProbeWindowClamp).
func HaveWindowClamp() error {
	windowClampOnce.Do(func() {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			windowClampErr = fmt.Errorf("kernel BTF: %w", err)
			return
		}
		var fn *btf.Func
		if spec.TypeByName("tcp_set_window_clamp", &fn) != nil {
			windowClampErr = errors.New("bpf_setsockopt refuses TCP_WINDOW_CLAMP before Linux 5.11")
		}
	})
	return windowClampErr
}

var (
	windowClampOnce sync.Once
	windowClampErr  error
)

// Load loads the program, reusing the shared maps.
func Load(cfg Config, sh Shared) (*Objects, error) {
	spec, err := configured(cfg)
	if err != nil {
		return nil, err
	}
	var objs Objects
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	for name, m := range sh {
		if _, ok := spec.Maps[name]; ok {
			opts.MapReplacements[name] = m
		}
	}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		return nil, fmt.Errorf("load sockops: %w", err)
	}
	if err := setAllowedCC(objs.LanesCcAllowed); err != nil {
		objs.Close()
		return nil, err
	}
	return &objs, nil
}

// allowedCCPath lists the congestion controls a caller without
// CAP_NET_ADMIN may set.
const allowedCCPath = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// setAllowedCC makes lanes_cc_allowed, which lanes_setsockopt checks for a
// background socket's callers other than root, the kernel's allow-list now.
func setAllowedCC(m *ebpf.Map) error {
	b, err := os.ReadFile(allowedCCPath)
	if err != nil {
		return fmt.Errorf("sockops: congestion control allow-list: %w", err)
	}
	return syncAllowedCC(m, strings.Fields(string(b)))
}

// SyncAllowedCC reads net.ipv4.tcp_allowed_congestion_control again into
// the program's allow-list (a name added since is allowed, a name removed
// is refused): the daemon calls it at each reload.
func (o *Objects) SyncAllowedCC() error { return setAllowedCC(o.LanesCcAllowed) }

// syncAllowedCC makes m hold exactly names (a name too long for a key is
// left out: the kernel has none).
func syncAllowedCC(m *ebpf.Map, names []string) error {
	want := map[[16]byte]bool{}
	for _, name := range names {
		var key [16]byte
		if len(name) < len(key) {
			copy(key[:], name)
			want[key] = true
		}
	}
	var (
		key   [16]byte
		v     uint8
		stale [][16]byte
	)
	it := m.Iterate()
	for it.Next(&key, &v) {
		if !want[key] {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("sockops: congestion control allow-list: %w", err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("sockops: congestion control allow-list: %w", err)
		}
	}
	for k := range want {
		if err := m.Put(k, uint8(1)); err != nil {
			return fmt.Errorf("sockops: congestion control allow-list: %w", err)
		}
	}
	return nil
}

// configured is the collection's spec with cfg set into its CFG.
// Objects is what Load gives: the maps and the two cgroup programs; the
// live-move iterator is loaded apart (LoadLive), so a kernel without it
// loses only the immediate switch.
type Objects struct {
	SockopsMaps
	SockopsVariables
	LanesSockops    *ebpf.Program `ebpf:"lanes_sockops"`
	LanesSetsockopt *ebpf.Program `ebpf:"lanes_setsockopt"`
}

// Close unloads the programs and maps.
func (o *Objects) Close() error {
	return errors.Join(o.SockopsMaps.Close(), o.LanesSockops.Close(), o.LanesSetsockopt.Close())
}

// LoadLive loads lanes_live_cc, the iter/tcp program that applies a live
// move's congestion control and TCP_NOTSENT_LOWAT at once (bpf_setsockopt
// from iter/tcp: Linux 5.14+), over the maps of objs, with the same cfg.
func LoadLive(cfg Config, objs *Objects) (*ebpf.Program, error) {
	spec, err := configured(cfg)
	if err != nil {
		return nil, err
	}
	var o struct {
		Live *ebpf.Program `ebpf:"lanes_live_cc"`
	}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"lanes_sk_state": objs.LanesSkState, "lanes_app_cc": objs.LanesAppCc,
		"lanes_ops_stats": objs.LanesOpsStats, "lanes_live_pending": objs.LanesLivePending,
	}}
	if err := spec.LoadAndAssign(&o, opts); err != nil {
		return nil, fmt.Errorf("load the live-move iterator: %w", err)
	}
	return o.Live, nil
}

// RLShareOn is RLShare's bit for sharing (state.h's RL_SHARE_ON).
const RLShareOn = 16

func configured(cfg Config) (*ebpf.CollectionSpec, error) {
	spec, err := LoadSockops()
	if err != nil {
		return nil, err
	}
	c := SockopsSockopsConfig{NetnsCookie: cfg.NetnsCookie, NotsentLowat: cfg.NotsentLowat, RlTargetUs: cfg.RLEDBATTargetUS}
	if cfg.NetnsCookie == 0 || !HaveNetnsCookie() {
		if cfg.NetnsInode == 0 {
			return nil, errors.New("sockops: no network namespace cookie (or no bpf_get_netns_cookie in sock_ops) and no namespace inode")
		}
		c.NetnsIno = cfg.NetnsInode
	}
	c.RlShare = cfg.RLShare
	if cfg.Yield {
		c.Yield = yieldOn
		if cfg.UntoldHeld {
			c.Yield |= yieldUntoldHeld
		}
		if cfg.DirectionsJoined {
			c.Yield |= yieldJoined
		}
		if cfg.RateByACKs {
			c.Yield |= yieldRateByACKs
		}
	}
	if cfg.BgCCName == "" {
		c.BgClampTargetUs = cfg.BgClampTargetUS
		if cfg.BgClampTargetUS != 0 {
			c.BgClampShare = cfg.BgClampShare
		}
	}
	if len(cfg.CCName) >= len(c.CcName) {
		return nil, fmt.Errorf("sockops: congestion control name %q longer than %d bytes", cfg.CCName, len(c.CcName)-1)
	}
	for i := 0; i < len(cfg.CCName); i++ {
		c.CcName[i] = int8(cfg.CCName[i])
	}
	if len(cfg.BgCCName) >= len(c.BgCcName) {
		return nil, fmt.Errorf("sockops: congestion control name %q longer than %d bytes", cfg.BgCCName, len(c.BgCcName)-1)
	}
	for i := 0; i < len(cfg.BgCCName); i++ {
		c.BgCcName[i] = int8(cfg.BgCCName[i])
	}
	if err := spec.Variables[SockopsVarCFG].Set(c); err != nil {
		return nil, fmt.Errorf("set sockops config: %w", err)
	}
	return spec, nil
}

// ReadCounters returns the summed lanes_ops_stats counters by name.
func ReadCounters(m *ebpf.Map) (map[string]uint64, error) {
	out := make(map[string]uint64, len(CounterNames))
	for i, name := range CounterNames {
		var per []uint64
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read sockops counter %s: %w", name, err)
		}
		var s uint64
		for _, v := range per {
			s += v
		}
		out[name] = s
	}
	return out, nil
}

// Probe loads the sock_ops program with the classifier's maps as the
// datapath does, without attaching it, and unloads both (lanes doctor).
func Probe() error {
	cls, err := classifier.Load(classifier.Config{})
	if err != nil {
		return fmt.Errorf("classifier: %w", err)
	}
	defer cls.Close()
	objs, err := Load(Config{NetnsCookie: 1, NetnsInode: 1, NotsentLowat: 16 << 10, BgClampTargetUS: 10000}, cls.Shared())
	if err != nil {
		return err
	}
	return objs.Close()
}

// NewLinkRate makes the account's upload capacity map (lanes_link_rate,
// lanes_linkrate.h) for a datapath to hand to Load and to LEDBAT++, so
// that both read and raise one estimate per interface.
func NewLinkRate() (*ebpf.Map, error) {
	spec, err := LoadSockops()
	if err != nil {
		return nil, err
	}
	m, err := ebpf.NewMap(spec.Maps[SockopsMapLanesLinkRate])
	if err != nil {
		return nil, fmt.Errorf("sockops: link rate map: %w", err)
	}
	return m, nil
}
