package android

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
)

// firstLoadable returns the first Location whose loader would load the
// object, with its report, or the reports of every Location.
func firstLoadable(t *testing.T, obj string) (Report, []Report) {
	t.Helper()
	var all []Report
	for _, loc := range Locations {
		r, err := Check(obj, loc)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK() {
			return r, nil
		}
		all = append(all, r)
	}
	return Report{}, all
}

// TestLanesObjects checks every object lanes ships against the rules of
// Android's loaders and prints which pass (where, pinned how) and why the
// others cannot be loaded by them.
func TestLanesObjects(t *testing.T) {
	lanes, err := filepath.Glob("../*/*_bpfel.o")
	if err != nil || len(lanes) == 0 {
		t.Fatalf("no objects found: %v", err)
	}
	android, _ := filepath.Glob("objects/*.o")
	pass := 0
	for _, obj := range append(lanes, android...) {
		r, fails := firstLoadable(t, obj)
		if fails == nil {
			pass++
			t.Logf("PASS %s: %s %s, programs %v, maps %v", obj, r.Location.Loader.Name, r.Location.Dir, r.Programs, r.Maps)
			continue
		}
		// The reasons under the loader whose prefixes name the most
		// program types (NetBpfLoad): what keeps the object out.
		t.Logf("CANNOT %s under %s: %s", obj, fails[0].Location.Loader.Name, strings.Join(fails[0].Problems, "; "))
	}
	t.Logf("%d of %d objects pass Android's loader rules (%s; %s)", pass, len(lanes)+len(android),
		NetBpfLoad.Source, PlatformBpfLoader.Source)
}

// TestAndroidFormObjectsPass: every object built in the loaders' form
// passes at the Tethering APEX's location, with the loader's pinned paths:
// netnscookie, bgclamp (the background upload's cwnd clamp, sock_ops), the
// classifier (tc) and sockops (lanes by socket), the last two sharing
// lanes_maps.h's maps (pinned without an object name).
func TestAndroidFormObjectsPass(t *testing.T) {
	const pin = "/sys/fs/bpf/tethering/"
	cases := []struct {
		obj   string
		progs []Program
		maps  []string // a subset, each "<name>" or, shared, "_<name>"
	}{
		{"netnscookie", []Program{{Section: "cgroupsockcreate/record_netns_cookie", Type: "CGROUP_SOCK",
			Pin: pin + "prog_netnscookie_cgroupsockcreate_record_netns_cookie"}}, []string{"netns_cookie"}},
		{"bgclamp", []Program{{Section: "sockops/lanes_bgclamp", Type: "SOCK_OPS",
			Pin: pin + "prog_bgclamp_sockops_lanes_bgclamp"}}, []string{"bg_target", "bgc_state"}},
		{"classifier", []Program{
			{Section: "schedcls/lanes_classify", Type: "SCHED_CLS", Pin: pin + "prog_classifier_schedcls_lanes_classify"},
			{Section: "schedcls/lanes_bg_ingress", Type: "SCHED_CLS", Pin: pin + "prog_classifier_schedcls_lanes_bg_ingress"},
		}, []string{"_lanes_cookie", "_lanes_tuple", "_lanes_dst", "_lanes_cgroup", "_lanes_uid", "lanes_cls_stats", "lanes_dscp"}},
		{"sockops", []Program{
			{Section: "sockops/lanes_sockops", Type: "SOCK_OPS", Pin: pin + "prog_sockops_sockops_lanes_sockops"},
			{Section: "cgroupsockcreate/lanes_sock_create", Type: "CGROUP_SOCK",
				Pin: pin + "prog_sockops_cgroupsockcreate_lanes_sock_create"},
		}, []string{"_lanes_cookie", "_lanes_cgroup", "_lanes_uid", "lanes_ops_cfg", "lanes_ops_stats", "bgc_state", "lanes_sock_owner"}},
	}
	for _, c := range cases {
		r, err := Check("objects/"+c.obj+".o", Locations[0])
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Errorf("%s (Android form) does not pass: %v", c.obj, r.Problems)
			continue
		}
		if !slices.Equal(r.Programs, c.progs) {
			t.Errorf("%s: programs %v, want %v", c.obj, r.Programs, c.progs)
		}
		for _, name := range c.maps {
			want := Map{Name: name, Pin: pin + "map_" + c.obj + "_" + name}
			if shared, ok := strings.CutPrefix(name, "_"); ok {
				want = Map{Name: shared, Pin: pin + "map__" + shared}
			}
			if !slices.Contains(r.Maps, want) {
				t.Errorf("%s: maps %v lack %v", c.obj, r.Maps, want)
			}
		}
	}
}

// TestRulesRefuse: what Android's loaders cannot load is refused with its
// reason: struct_ops, BTF program types, BTF maps, a networking type in the
// platform's /system/etc/bpf.
func TestRulesRefuse(t *testing.T) {
	cases := []struct{ obj, reason string }{
		{"../ledbat/ledbat_bpfel.o", `"struct_ops"`},
		{"../capcc/capcc_bpfel.o", `"struct_ops"`},
		{"../procevents/procevents_bpfel.o", `"tp_btf/`},
		{"../sockowner/sockowner_bpfel.o", `"iter/`},
		{"../netnscookie/netnscookie_bpfel.o", `BTF-defined maps`},
		{"../classifier/classifier_bpfel.o", `program section "tc"`},
	}
	for _, c := range cases {
		for _, loc := range Locations {
			r, err := Check(c.obj, loc)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), c.reason) {
				t.Errorf("%s at %s: ok=%v, problems %q, want one naming %s", c.obj, loc.Dir, r.OK(), r.Problems, c.reason)
			}
		}
	}
	system := Locations[len(Locations)-2]
	r, err := Check("objects/netnscookie.o", system)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), `"cgroupsockcreate/record_netns_cookie"`) {
		t.Errorf("a CGROUP_SOCK program in %s: ok=%v, problems %q, want its section refused", system.Dir, r.OK(), r.Problems)
	}
}

// TestHelperCallsRead: the helper calls of a program's instructions (a
// 64-bit immediate load whose value holds a call's opcode is none), and
// the table's verdict on the uid helper.
func TestHelperCallsRead(t *testing.T) {
	insns := asm.Instructions{
		asm.LoadImm(asm.R1, 0x0000008500000085, asm.DWord),
		asm.FnGetCurrentUidGid.Call(),
		asm.FnGetSocketCookie.Call(),
		asm.Return(),
	}
	var buf bytes.Buffer
	if err := insns.Marshal(&buf, binary.LittleEndian); err != nil {
		t.Fatal(err)
	}
	got := helperCalls(buf.Bytes())
	want := []int32{int32(asm.FnGetCurrentUidGid), int32(asm.FnGetSocketCookie)}
	if !slices.Equal(got, want) {
		t.Errorf("helper calls %v, want %v", got, want)
	}
	if h, ok := refusedHelpers["SOCK_OPS"][int32(asm.FnGetCurrentUidGid)]; !ok || h.from <= kver(6, 12, 0xff) {
		t.Errorf("bpf_get_current_uid_gid in SOCK_OPS: %+v; want refused on 6.12", h)
	}
	if _, ok := refusedHelpers["CGROUP_SOCK"][int32(asm.FnGetCurrentUidGid)]; ok {
		t.Error("bpf_get_current_uid_gid refused to CGROUP_SOCK; every kernel from 5.10 allows it")
	}
}
