// egress.go is the per-interface half of the datapath: the HTB tree whose
// filter runs the Host's classifier program (qdisc.go) and the short device
// queue (devqueue.go). An Egress holds no BPF object of its own, so
// interfaces come and go (Wi-Fi to cellular, a USB modem) without touching
// sockets, cgroups or map contents.
//
// Lifecycle:
//   - OpenEgress on an interface whose root qdisc is this instance's tree
//     (left by a crashed or killed run) adopts it: the tree's parameters and
//     filter are replaced in place, so traffic is never unshaped; a root
//     qdisc of someone else is refused.
//   - Close removes the tree and restores the device queue.
//   - The device queue's previous settings are written to a state file
//     before the device is changed, so a crash at any point can be undone.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/lane"
)

// EgressConfig describes the lanes tree of one interface.
type EgressConfig struct {
	Interface          string
	Mode               Mode
	UplinkBps          uint64 // Shaped: link rate in bit/s; the root rate is set just below it
	BackgroundFloorBps uint64 // Shaped: guaranteed background rate, 0 = strictly below best effort
	DeviceQueueBytes   int    // BQL limit_max where the driver has BQL (default: one frame)
	TxQueueLen         int    // txqueuelen where there is no BQL (default: DeviceQueueBytes in frames, at least 2; TUN/TAP: unchanged)
	InteractiveLeaf    string // the interactive lane's leaf: LeafAuto (fq_codel where the kernel has it, else bfifo), LeafBfifo
}

func (c *EgressConfig) validate() error {
	if c.Interface == "" {
		return errors.New("datapath: no interface")
	}
	switch c.Mode {
	case DeviceBottleneck:
	case Shaped:
		if c.UplinkBps < 100_000 {
			return fmt.Errorf("datapath: shaped mode needs an uplink rate of at least 100 kbit/s, got %d bit/s", c.UplinkBps)
		}
	default:
		return fmt.Errorf("datapath: unknown mode %d", c.Mode)
	}
	return nil
}

// Egress is the installed lanes tree of one interface.
type Egress struct {
	cfg      EgressConfig
	instance string
	stateDir string // the state files' directory (HostConfig.StateDir)
	progFD   int    // the host's classifier
	ns       *nsRef
	link     netlink.Link
	devq     *devQueueState
	adopted  bool
	host     *Host
	ackBytes uint64 // the ACK class's rate, bytes/s (0: unrestricted)
	leaf     string // the interactive lane's leaf qdisc kind (qdisc.go)
	ackErr   error  // why the tree has no ACK class (nil: it has)
	bgErr    error  // why background downloads are not policed (nil: they are; bgclass.go)
	// the background non-TCP shaper (bgshape.go): its ceil (0: R), and
	// why the tree has none (nil: it has)
	bgShapeBytes uint64
	bgShapeErr   error
	heldAck      heldAckClass // the held-ACK class 1:16 and its pacer (heldack.go)
	// the arrivals' IFB device (bgifb.go), its class's rate (0: open), and
	// why the tree has none (nil: it has)
	bgIfb      netlink.Link
	bgIfbBytes uint64
	bgIfbErr   error
	// the IFB's rx_dropped and its class's packets sent at the last read
	// (checkIfbDelivers)
	bgIfbDropped, bgIfbSent uint64

	mu     sync.Mutex
	closed bool
}

// OpenEgress installs (or adopts) the lanes tree on cfg.Interface, in the
// calling thread's network namespace, with h's classifier as its filter.
func OpenEgress(h *Host, cfg EgressConfig) (e *Egress, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ns, err := currentNS()
	if err != nil {
		return nil, err
	}
	e = &Egress{cfg: cfg, instance: h.cfg.Instance, stateDir: h.cfg.StateDir, ns: ns, progFD: h.ClassifierFD(), host: h}
	e.heldAck.e = e
	defer func() {
		if err != nil {
			err = errors.Join(err, e.teardown())
			e = nil
		}
	}()
	if err := ns.do(func() (err error) { e.link, err = netlink.LinkByName(cfg.Interface); return }); err != nil {
		return e, fmt.Errorf("interface %s: %w", cfg.Interface, err)
	}
	var owner ownership
	var desc string
	if err := ns.do(func() (err error) { owner, desc, err = rootOwnership(e.link, e.instance); return }); err != nil {
		return e, err
	}
	switch owner {
	case rootForeign:
		return e, fmt.Errorf("datapath: root qdisc %s on %s is not lanes' (instance %s): remove it first", desc, cfg.Interface, e.instance)
	case rootOurs:
		e.adopted = true
		slog.Info("datapath: adopting this instance's tree left by an earlier run", "interface", cfg.Interface, "instance", e.instance)
	}
	// A previous run's device queue settings go back first, so that what
	// is saved below is the device's own.
	if err := restoreFromStateFile(ns, e.link, e.instance, e.stateDir); err != nil {
		return e, err
	}
	if err := e.refreshLink(); err != nil {
		return e, err
	}
	if err := e.shortenQueue(); err != nil {
		return e, err
	}
	if err := ns.do(func() (err error) {
		e.leaf, err = buildTree(e.link, paramsFor(cfg), h.ClassifierFD(), e.instance, e.adopted)
		return err
	}); err != nil {
		return e, err
	}
	e.buildAck(h.Trees.add(e))
	e.buildBgShape()
	e.heldAck.build()
	e.buildBgIfb()
	if err := e.openBgClass(); err != nil {
		return e, err
	}
	return e, nil
}

// refreshLink reads the device's attributes again: after a restore they
// are not what was read before it, and shortenQueue saves and compares
// against them (a crash-restart read the shortened queue as the device's
// own, changed nothing and wrote no state).
func (e *Egress) refreshLink() error {
	return e.ns.do(func() error {
		l, err := netlink.LinkByIndex(e.link.Attrs().Index)
		if err != nil {
			return fmt.Errorf("interface %s: %w", e.cfg.Interface, err)
		}
		e.link = l
		return nil
	})
}

func (e *Egress) shortenQueue() (err error) {
	cfg := e.cfg
	mtu := e.link.Attrs().MTU
	if mtu <= 0 {
		mtu = 1500
	}
	qbytes := cfg.DeviceQueueBytes
	if qbytes <= 0 {
		qbytes = mtu + 14
	}
	txq := cfg.TxQueueLen
	if txq <= 0 {
		txq = max(2, (qbytes+mtu-1)/mtu)
		if e.link.Type() == "tuntap" {
			// TUN/TAP drops when its ring is full instead of stopping the
			// queue, so a short ring only adds loss: leave it alone.
			txq = 0
		}
	}
	if e.link.Type() == "tuntap" && cfg.Mode == DeviceBottleneck {
		slog.Warn("datapath: TUN/TAP has no transmit backpressure, so no queue forms in the lanes qdisc in device-bottleneck mode; use shaped mode",
			"interface", cfg.Interface)
	}
	gsoSegs := 0
	if cfg.Mode == Shaped {
		// one GSO packet ~ 1 ms at the shaped rate, at least 2 segments
		gsoSegs = min(64, max(2, int(paramsFor(cfg).rootBytes/1000)/(mtu-40)))
	}
	sf := stateFile(e.stateDir, cfg.Interface, e.instance)
	save := func(st *devQueueState) error {
		if err := writeState(sf, st); err != nil {
			return fmt.Errorf("write state file: %w", err)
		}
		return nil
	}
	e.devq, err = shortenDeviceQueue(e.ns, e.link, qbytes, txq, gsoSegs, save)
	return err
}

// restoreFromStateFile undoes what a previous run of instance changed on
// the device, as its state file in dir says, and removes the file.
func restoreFromStateFile(ns *nsRef, l netlink.Link, instance, dir string) error {
	sf := stateFile(dir, l.Attrs().Name, instance)
	st, err := readState(sf)
	if errors.Is(err, errNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(restoreDeviceQueue(ns, l, st), removeFile(sf))
}

// Update changes the tree's parameters and the device queue in place (the
// root qdisc stays, so traffic is never unshaped); the interface must be
// the same.
func (e *Egress) Update(cfg EgressConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	if cfg.Interface != e.cfg.Interface {
		return fmt.Errorf("datapath: egress of %s cannot move to %s", e.cfg.Interface, cfg.Interface)
	}
	if err := restoreDeviceQueue(e.ns, e.link, e.devq); err != nil {
		return err
	}
	e.devq = nil
	if err := removeFile(stateFile(e.stateDir, e.cfg.Interface, e.instance)); err != nil {
		return err
	}
	if err := e.refreshLink(); err != nil {
		return err
	}
	e.cfg = cfg
	if err := e.shortenQueue(); err != nil {
		return err
	}
	if err := e.ns.do(func() (err error) {
		e.leaf, err = buildTree(e.link, paramsFor(cfg), e.progFD, e.instance, true)
		return err
	}); err != nil {
		return err
	}
	e.buildAck(e.ackBytes)
	e.buildBgShape()
	e.heldAck.build()
	return nil
}

// Interface is the name of the interface.
func (e *Egress) Interface() string { return e.cfg.Interface }

// InteractiveLeaf is the kind of the interactive lane's leaf qdisc:
// fq_codel or bfifo.
func (e *Egress) InteractiveLeaf() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leaf
}

// Config is what the egress was opened with.
func (e *Egress) Config() EgressConfig { return e.cfg }

// Adopted says whether Open found this instance's tree already installed
// (left by a killed run) and took it over in place.
func (e *Egress) Adopted() bool { return e.adopted }

// Close removes the tree and restores the device queue.
func (e *Egress) Close() error {
	if e.host != nil { // before e.mu: SetAckClass holds the trees' lock, then e.mu
		e.host.Trees.remove(e)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.teardown()
}

func (e *Egress) teardown() error {
	var errs []error
	if e.link != nil {
		errs = append(errs, e.closeBgClass(), e.closeBgIfb())
		errs = append(errs, e.ns.do(func() error {
			owner, _, err := rootOwnership(e.link, e.instance)
			if err != nil || owner != rootOurs {
				return ignoreGone(err)
			}
			return ignoreGone(deleteTree(e.link))
		}))
		if e.devq != nil {
			errs = append(errs, ignoreGone(restoreDeviceQueue(e.ns, e.link, e.devq)))
		}
		if err := removeFile(stateFile(e.stateDir, e.cfg.Interface, e.instance)); err != nil {
			errs = append(errs, err)
		}
	}
	e.ns.close()
	return errors.Join(errs...)
}

// ignoreGone drops the errors of an interface that has disappeared: its
// qdiscs and settings went with it.
func ignoreGone(err error) error {
	if err == nil || isNotFound(err) || errors.Is(err, errNoDevice) {
		return nil
	}
	return err
}

// Stats reads the HTB class counters of the tree.
func (e *Egress) Stats() (map[lane.Lane]LaneStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	var hs map[uint32]*netlink.ClassStatistics
	if err := e.ns.do(func() (err error) { hs, err = classStats(e.link); return }); err != nil {
		return nil, err
	}
	out := map[lane.Lane]LaneStats{}
	for _, l := range lane.All {
		ls := LaneStats{Lane: l, ClassID: netlink.HandleStr(l.ClassID())}
		ls.add(hs[l.ClassID()])
		if l == lane.Background { // the lane's non-TCP egress where it is shaped (bgshape.go)
			ls.add(hs[lane.BgShapeClassID])
		}
		out[l] = ls
	}
	return out, nil
}

// add counts an HTB class's counters (nil: none) into the lane's.
func (ls *LaneStats) add(st *netlink.ClassStatistics) {
	if st == nil {
		return
	}
	if st.Basic != nil {
		ls.Packets, ls.Bytes = ls.Packets+uint64(st.Basic.Packets), ls.Bytes+st.Basic.Bytes
	}
	if st.Queue != nil {
		ls.Drops, ls.Overlimits = ls.Drops+uint64(st.Queue.Drops), ls.Overlimits+uint64(st.Queue.Overlimits)
		ls.BacklogBytes, ls.BacklogPackets = ls.BacklogBytes+uint64(st.Queue.Backlog), ls.BacklogPackets+uint64(st.Queue.Qlen)
	}
}
