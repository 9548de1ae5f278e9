package android

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
// netnscookie, and bgclamp (the background upload's cwnd clamp, sock_ops).
func TestAndroidFormObjectsPass(t *testing.T) {
	r, err := Check("objects/netnscookie.o", Locations[0])
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("netnscookie (Android form) does not pass: %v", r.Problems)
	}
	wantProg := Program{Section: "cgroupsockcreate/record_netns_cookie", Type: "CGROUP_SOCK",
		Pin: "/sys/fs/bpf/tethering/prog_netnscookie_cgroupsockcreate_record_netns_cookie"}
	if !slices.Equal(r.Programs, []Program{wantProg}) {
		t.Errorf("programs %v, want %v", r.Programs, wantProg)
	}
	if want := []Map{{Name: "netns_cookie", Pin: "/sys/fs/bpf/tethering/map_netnscookie_netns_cookie"}}; !slices.Equal(r.Maps, want) {
		t.Errorf("maps %v, want %v", r.Maps, want)
	}
	// the background upload's LEDBAT++ without struct_ops (sock_ops)
	r, err = Check("objects/bgclamp.o", Locations[0])
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("bgclamp (Android form) does not pass: %v", r.Problems)
	}
	wantProg = Program{Section: "sockops/lanes_bgclamp", Type: "SOCK_OPS",
		Pin: "/sys/fs/bpf/tethering/prog_bgclamp_sockops_lanes_bgclamp"}
	if !slices.Equal(r.Programs, []Program{wantProg}) {
		t.Errorf("programs %v, want %v", r.Programs, wantProg)
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
