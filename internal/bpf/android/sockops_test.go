// sockops_test.go: the Android-form sock_ops object (objects/sockops.c)
// and the classifier's, loaded and pinned as NetBpfLoad does at boot
// (LoadAndPin, under a bpffs of the test's own): the two share
// lanes_maps.h's maps through their pins; a daemon writes a cgroup's lane,
// a uid's lane and the configuration into the pinned maps; with the
// object's two programs attached to a test cgroup (sock_ops and the
// socket-creation program that records a socket's creator), a background
// upload from the ruled cgroup and one by the ruled uid get their lane by
// cookie (what the classifier reads), their TCP_NOTSENT_LOWAT and
// LEDBAT++'s cwnd clamp; an upload matching no rule gets none of it.
package android

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// bootLoad pins the objects as the loader would at boot under a bpffs
// mounted for the test and returns their reports.
func bootLoad(t *testing.T, objs ...string) (string, []Report) {
	t.Helper()
	testutil.RequireRoot(t)
	root := t.TempDir()
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
		t.Fatalf("bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	var rs []Report
	for _, obj := range objs {
		r, err := LoadAndPin("objects/"+obj+".o", Locations[0], root)
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		rs = append(rs, r)
	}
	return root, rs
}

func cgroupID(t *testing.T, cg string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(cg, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestAndroidFormSockopsLanes(t *testing.T) {
	root, rs := bootLoad(t, "classifier", "sockops")
	cls, err := OpenPinned(rs[0], root)
	if err != nil {
		t.Fatal(err)
	}
	defer cls.Close()
	ops, err := OpenPinned(rs[1], root)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	sameMap(t, cls.Maps["lanes_cookie"], ops.Maps["lanes_cookie"])
	const lowat, target = 65536, 10000
	if err := ops.Maps["lanes_ops_cfg"].Put(uint32(0), [2]uint32{lowat, target}); err != nil {
		t.Fatal(err)
	}
	bg, other, byUID := testCgroup(t), testCgroup(t), testCgroup(t)
	// the daemon's rule, written into the classifier's pinned map
	if err := cls.Maps["lanes_cgroup"].Put(cgroupID(t, bg), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	addr := sink(t)
	for _, c := range []struct {
		name, cg   string
		uidRule    bool // the test's uid has a rule while this upload runs
		background bool
	}{{"by cgroup", bg, false, true}, {"no rule", other, false, false}, {"by uid", byUID, true, true}} {
		if c.uidRule {
			putUIDRule(t, cls.Maps["lanes_uid"])
		}
		closeLinks := attachSockops(t, ops, c.cg)
		uploadFrom(t, c.cg, addr, func(cookie uint64, got int) {
			var l uint32
			found := cls.Maps["lanes_cookie"].Lookup(cookie, &l) == nil
			t.Logf("%s: lane %d (stored %v), TCP_NOTSENT_LOWAT %d", c.name, l, found, got)
			if c.background && (!found || l != uint32(lane.Background) || got != lowat) {
				t.Errorf("background upload %s: lane %d (stored %v), TCP_NOTSENT_LOWAT %d; want lane %d, %d",
					c.name, l, found, got, lane.Background, lowat)
			}
			if !c.background && (found || got == lowat) {
				t.Errorf("upload without a rule: lane %d (stored %v), TCP_NOTSENT_LOWAT %d; want none", l, found, got)
			}
		}, func(cookie uint64) {
			st, found := readBgcState(t, ops.Maps["bgc_state"], cookie)
			t.Logf("%s: clamp state %+v (found %v)", c.name, st, found)
			if c.background && (!found || st.samples == 0 || st.applied == 0) {
				t.Errorf("background upload %s: clamp state %+v (found %v); want RTT samples and a clamp", c.name, st, found)
			}
			if !c.background && found {
				t.Errorf("upload without a rule got clamp state %+v", st)
			}
		})
		closeLinks()
	}
	for _, k := range []abi.AbiOpsCounter{abi.AbiOpsCounterOPS_BY_CGROUP, abi.AbiOpsCounterOPS_BY_UID} {
		if n := opsCount(t, ops.Maps["lanes_ops_stats"], k); n != 1 {
			t.Errorf("lanes by %v: %d, want 1", k, n)
		}
	}
	var left int
	for it := ops.Maps["lanes_sock_owner"].Iterate(); it.Next(new(uint64), new([16]byte)); {
		left++
	}
	t.Logf("lanes_sock_owner entries left: %d (connected sockets' go at connect)", left)
}

// attachSockops attaches the object's sock_ops and socket-creation
// programs to cg, as a daemon does at the cgroup v2 root; the returned
// function detaches both.
func attachSockops(t *testing.T, ops *Objects, cg string) func() {
	t.Helper()
	var links []link.Link
	for _, a := range []struct {
		section string
		attach  ebpf.AttachType
	}{{"cgroupsockcreate/lanes_sock_create", ebpf.AttachCGroupInetSockCreate}, {"sockops/lanes_sockops", ebpf.AttachCGroupSockOps}} {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: a.attach, Program: ops.Programs[a.section]})
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			t.Fatalf("attach %s to %s: %v", a.section, cg, err)
		}
		links = append(links, l)
	}
	return func() {
		for _, l := range links {
			l.Close()
		}
	}
}

// putUIDRule gives the test's uid the background lane in lanes_uid until
// the test ends.
func putUIDRule(t *testing.T, m *ebpf.Map) {
	t.Helper()
	uid := uint32(os.Getuid())
	if err := m.Put(uid, uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Delete(uid) })
}

// opsCount sums counter k of lanes_ops_stats over the CPUs.
func opsCount(t *testing.T, m *ebpf.Map, k abi.AbiOpsCounter) uint64 {
	t.Helper()
	var per []uint64
	if err := m.Lookup(uint32(k), &per); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// sameMap fails unless a and b are one kernel map.
func sameMap(t *testing.T, a, b *ebpf.Map) {
	t.Helper()
	ia, err := a.Info()
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.Info()
	if err != nil {
		t.Fatal(err)
	}
	idA, _ := ia.ID()
	idB, _ := ib.ID()
	if idA != idB {
		t.Errorf("lanes_cookie: the classifier's map %d, sock_ops' %d: not shared", idA, idB)
	}
}

// sink accepts TCP connections on loopback and discards what they send,
// until the test ends.
func sink(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}
