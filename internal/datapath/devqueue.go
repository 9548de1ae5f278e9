// devqueue.go keeps the device's own transmit queue short, so that the
// standing queue forms in the lanes qdisc, where priority applies, and not
// in the driver below it:
//
//   - where the driver has BQL (/sys/class/net/IF/queues/tx-*/byte_queue_limits),
//     limit_max of every tx queue is set to about one frame;
//
//   - otherwise (veth, most virtual devices) txqueuelen is set small. On
//     veth it only sets the default limit of qdiscs created without one
//     (ours all have a limit), so it is harmless there. TUN/TAP is left
//     alone: txqueuelen is the size of the ring its reader drains, and
//     tun_net_xmit drops when that ring is full instead of stopping the
//     queue (checked on 6.18: HTB with backlog 0 while the device counted
//     498 of 500 packets dropped), so a short ring only adds loss; on TUN
//     only shaped mode keeps the queue in the lanes qdisc.
//
//   - in shaped mode, gso_max_segs is lowered so that one GSO packet is about
//     a millisecond at the shaped rate (at least 2 segments): HTB sends a
//     packet whole, so a 64 KB background super-packet would hold a
//     foreground packet back for 55 ms at 10 Mbit/s. Sockets pick the limit
//     up when they connect (sk_setup_caps).
//
//   - a zero txqueuelen is saved even where it is not changed: kernels
//     before 6.x set it to 1000 when a qdisc is attached to a no-queue
//     device, and the release puts the 0 back.
//
// The previous values are saved in memory and in a state file, and restored
// on Close, or by Cleanup after a crash. Each value is saved (save callback,
// the state file) before the device is changed, so a crash between the two
// never loses the value to restore.
package datapath

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rootpath"
)

// devQueueState is what was changed on the device, to undo it.
type devQueueState struct {
	Interface  string         `json:"interface"`
	BQLLimit   map[string]int `json:"bql_limit_max,omitempty"` // tx queue -> previous limit_max
	TxQueueLen *int           `json:"txqueuelen,omitempty"`    // previous txqueuelen if changed
	GSOMaxSegs *int           `json:"gso_max_segs,omitempty"`  // previous gso_max_segs if changed
}

// DefaultStateDir holds the state files that let Cleanup undo a crashed
// run where the host's configuration names no directory (HostConfig.StateDir).
// It must outlive the run (a runtime directory such as /run/lanes is removed
// when the unit stops): the daemon names <its state directory>/datapath.
const DefaultStateDir = "/var/lib/lanes/datapath"

// stateFile is the state file of instance's changes to iface in dir (""
// for DefaultStateDir).
func stateFile(dir, iface, instance string) string {
	if dir == "" {
		dir = DefaultStateDir
	}
	return filepath.Join(dir, instance+"."+iface+".json")
}

func writeState(path string, st *devQueueState) error {
	if err := rootpath.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(st)
	return rootpath.WriteFile(path, b, 0o644)
}

func readState(path string) (*devQueueState, error) {
	b, err := rootpath.ReadFile(path, 64<<10)
	if err != nil {
		return nil, err
	}
	var st devQueueState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// shortenDeviceQueue applies the short device queue and returns what it
// replaced. queueBytes is the BQL limit_max; txqlen the fallback txqueuelen;
// gsoSegs the gso_max_segs to lower to (0 = leave). save is called with the
// state before each change of the device; its error stops the change.
func shortenDeviceQueue(ns *nsRef, link netlink.Link, queueBytes, txqlen, gsoSegs int, save func(*devQueueState) error) (*devQueueState, error) {
	name := link.Attrs().Name
	st := &devQueueState{Interface: name, BQLLimit: map[string]int{}}
	err := ns.withSysfs(func(sys string) error { return setBQL(sys, name, queueBytes, st, save) })
	if errors.Is(err, errSysfsSetup) {
		// Without a private sysfs the process's own /sys may still be this
		// namespace's; if it is not, BQL is left alone (txqueuelen below).
		if sysfsIsOurs(ns, link) {
			err = setBQL("/sys", name, queueBytes, st, save)
		} else {
			slog.Warn("datapath: cannot reach this namespace's sysfs, BQL left alone", "interface", name, "err", err)
			err = nil
		}
	}
	if err != nil {
		restoreDeviceQueue(ns, link, st)
		return nil, err
	}
	if old := int(link.Attrs().GSOMaxSegs); gsoSegs > 0 && old > gsoSegs { // 0 = not reported: leave alone
		st.GSOMaxSegs = &old
		if err := save(st); err != nil {
			restoreDeviceQueue(ns, link, st)
			return nil, err
		}
		if err := ns.do(func() error { return netlink.LinkSetGSOMaxSegs(link, gsoSegs) }); err != nil {
			restoreDeviceQueue(ns, link, st)
			return nil, fmt.Errorf("set gso_max_segs of %s to %d: %w", name, gsoSegs, err)
		}
	}
	old := link.Attrs().TxQLen
	if len(st.BQLLimit) > 0 || txqlen <= 0 || old == txqlen {
		if old != 0 {
			return st, nil
		}
		// Kernels before 6.x raise a zero txqueuelen of a no-queue device
		// (veth) to 1000 when a qdisc is attached (qdisc_create: "Caught
		// tx_queue_len zero misconfig"; 5.10 does, 6.18 and 7.2 do not):
		// saved, so that the release puts the device's 0 back.
		txqlen = 0
	}
	st.TxQueueLen = &old
	if err := save(st); err != nil {
		restoreDeviceQueue(ns, link, st)
		return nil, err
	}
	if txqlen == 0 {
		return st, nil
	}
	if err := ns.do(func() error { return netlink.LinkSetTxQLen(link, txqlen) }); err != nil {
		restoreDeviceQueue(ns, link, st)
		return nil, fmt.Errorf("set txqueuelen of %s to %d: %w", name, txqlen, err)
	}
	return st, nil
}

// setBQL sets limit_max of every tx queue of name under sysfs root sys and
// records the old values in st, saved before the first write.
func setBQL(sys, name string, queueBytes int, st *devQueueState, save func(*devQueueState) error) error {
	qs, _ := filepath.Glob(filepath.Join(sys, "class/net", name, "queues/tx-*/byte_queue_limits/limit_max"))
	for _, f := range qs {
		old, err := readInt(f)
		if err != nil {
			return err
		}
		st.BQLLimit[queueName(f)] = old
	}
	if len(qs) == 0 {
		return nil
	}
	if err := save(st); err != nil {
		return err
	}
	for _, f := range qs {
		if err := os.WriteFile(f, []byte(strconv.Itoa(queueBytes)), 0); err != nil {
			return fmt.Errorf("set BQL %s: %w", f, err)
		}
	}
	return nil
}

// sysfsIsOurs says whether the process's /sys shows link: the process is in
// the link's namespace and /sys has the link under its name and ifindex.
func sysfsIsOurs(ns *nsRef, link netlink.Link) bool {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/net", &st) != nil || st.Ino != ns.inode() {
		return false
	}
	idx, err := readInt(filepath.Join("/sys/class/net", link.Attrs().Name, "ifindex"))
	return err == nil && idx == link.Attrs().Index
}

// restoreDeviceQueue puts back what shortenDeviceQueue changed.
func restoreDeviceQueue(ns *nsRef, link netlink.Link, st *devQueueState) error {
	if st == nil {
		return nil
	}
	var errs []error
	if len(st.BQLLimit) > 0 {
		err := ns.withSysfs(func(sys string) error { return restoreBQL(sys, st) })
		if errors.Is(err, errSysfsSetup) && sysfsIsOurs(ns, link) {
			err = restoreBQL("/sys", st)
		}
		errs = append(errs, err)
	}
	if st.TxQueueLen != nil {
		errs = append(errs, ns.do(func() error {
			if err := netlink.LinkSetTxQLen(link, *st.TxQueueLen); err != nil {
				return fmt.Errorf("restore txqueuelen of %s: %w", st.Interface, err)
			}
			return nil
		}))
	}
	if st.GSOMaxSegs != nil && *st.GSOMaxSegs > 0 {
		errs = append(errs, ns.do(func() error {
			if err := netlink.LinkSetGSOMaxSegs(link, *st.GSOMaxSegs); err != nil {
				return fmt.Errorf("restore gso_max_segs of %s: %w", st.Interface, err)
			}
			return nil
		}))
	}
	return errors.Join(errs...)
}

func restoreBQL(sys string, st *devQueueState) error {
	var errs []error
	for q, v := range st.BQLLimit {
		f := filepath.Join(sys, "class/net", st.Interface, "queues", q, "byte_queue_limits/limit_max")
		if err := os.WriteFile(f, []byte(strconv.Itoa(v)), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("restore BQL %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}

func queueName(limitMaxPath string) string {
	// .../queues/tx-0/byte_queue_limits/limit_max -> tx-0
	return filepath.Base(filepath.Dir(filepath.Dir(limitMaxPath)))
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
