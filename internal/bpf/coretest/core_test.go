// Package coretest checks that every lanes BPF object relocates (CO-RE)
// against the BTF of the kernels lanes supports, without loading anything:
// each program's relocations are resolved against a kernel's BTF, and a
// field that kernel lacks may be read only behind its own
// bpf_core_field_exists check (otherwise the verifier would meet the
// poisoned instruction and refuse the whole program). It also reports, per
// kernel, the capabilities that are off (or fall back) because the kernel
// lacks a feature an object needs beyond relocation (a program type, a
// helper, struct_ops links: testdata/features.txt).
//
// testdata (see its README.md for the packages' versions and sha256) holds,
// per kernel, minimal BTF (`bpftool gen min_core_btf`: only the types the
// objects relocate against, a few KB) and NAME.features (which of
// features.txt the kernel's full BTF has), of:
//   - linux-5.10.*-debian: Debian 11's linux-image-5.10.0-N-cloud-amd64;
//   - linux-6.1.*-debian: Debian 12's linux-image-6.1.0-N-cloud-amd64
//     (vmlinux extracted from each package's bzImage);
//   - linux-6.18.44-running: the kernel these objects were built on;
//   - models/linux-5.15.o: a MODEL of 5.15's BTF (no 5.15 kernel package
//     is reachable from here): the 6.1 types with the layout changes that
//     matter taken back (struct cgroup ancestor ids); models/*.c say which
//     and are rebuilt by `go generate` (the directive below; the flag
//     keeps the build directory out of the object). A model has no .features: a feature counts as present
//     on it from the version features.txt gives.
//
// scripts/core-btf.sh regenerates the real kernels' files after an object
// uses new kernel types (`make generate` first).
package coretest

//go:generate sh -c "clang-19 -target bpf -mcpu=v1 -nostdinc -O2 -g -Wall -Werror -fno-ident -fdebug-compilation-dir=. -c testdata/models/linux-5.15.c -o testdata/models/linux-5.15.o && llvm-strip-19 -g testdata/models/linux-5.15.o"

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/netnscookie"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/tcpevents"
	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
)

var objects = map[string]func() (*ebpf.CollectionSpec, error){
	"classifier": classifier.LoadClassifier,
	"sockops":    sockops.LoadSockops,
	"capcc":      capcc.LoadCapcc,
	"ledbat":     ledbat.LoadLedbat,
	"tcpevents":  tcpevents.LoadSpec,
	"tcpiter":    tcpiter.LoadTcpiter,
	"ledbatstep": ledbat.LoadStep,
	// netnscookie reads only its context (uapi struct bpf_sock): nothing
	// to relocate, but its helper must exist on every kernel (features)
	"netnscookie": netnscookie.LoadNetnscookie,
}

// reloKey names what a relocation looks at (type and field path), without
// its kind: "Struct:"sock___val"[0:0:0]".
var reloRE = regexp.MustCompile(`^CORERelocation\([a-z_0-9]+, (.*), local_id=\d+\)$`)

func reloKey(r *btf.CORERelocation) string {
	if m := reloRE.FindStringSubmatch(r.String()); m != nil {
		return m[1]
	}
	return r.String()
}

// modelled are the objects the models' types cover (written before the
// TCP iterator and the LEDBAT++ step harness were checked here).
var modelled = map[string]bool{"classifier": true, "sockops": true, "capcc": true, "ledbat": true, "tcpevents": true, "netnscookie": true}

// required are the objects without which there is no datapath: no kernel
// lanes supports may lack a feature they need.
var required = map[string]bool{"classifier": true}

type kernel struct {
	name, path string
	model      string // "5.15" for models/linux-5.15.o, "" for real BTF
}

func kernels(t *testing.T) []kernel {
	real, err := filepath.Glob("testdata/*.btf")
	models, _ := filepath.Glob("testdata/models/*.o")
	if err != nil || len(real) == 0 {
		t.Fatalf("no kernel BTF in testdata: %v", err)
	}
	var out []kernel
	for _, p := range real {
		out = append(out, kernel{name: strings.TrimSuffix(filepath.Base(p), ".btf"), path: p})
	}
	for _, p := range models {
		v := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(p), ".o"), "linux-")
		out = append(out, kernel{name: "model-linux-" + v, path: p, model: v})
	}
	return out
}

func TestObjectsRelocateOnSupportedKernels(t *testing.T) {
	for _, k := range kernels(t) {
		target, err := btf.LoadSpec(k.path)
		if err != nil {
			t.Fatalf("%s: %v", k.path, err)
		}
		for name, load := range objects {
			spec, err := load()
			if err != nil {
				t.Fatal(err)
			}
			for pname, prog := range spec.Programs {
				t.Run(k.name+"/"+name+"/"+pname, func(t *testing.T) {
					if k.model != "" && !modelled[name] {
						t.Skipf("%s's types are not in the %s model", name, k.model)
					}
					checkProgram(t, spec, prog, target)
				})
			}
		}
	}
}

// feature is one line of testdata/features.txt.
type feature struct {
	name, since, effect, what string
	objects                   []string
}

func loadFeatures(t *testing.T) []feature {
	b, err := os.ReadFile("testdata/features.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []feature
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 6 || (f[4] != "off" && f[4] != "fallback") {
			t.Fatalf("features.txt: bad line %q", line)
		}
		for _, o := range strings.Split(f[3], ",") {
			if objects[o] == nil {
				t.Fatalf("features.txt: %s: unknown object %q", f[0], o)
			}
		}
		out = append(out, feature{name: f[0], since: f[2], objects: strings.Split(f[3], ","), effect: f[4], what: strings.Join(f[5:], " ")})
	}
	return out
}

// present returns the features kernel k has: its .features file, or for a
// model those from a version up to the model's.
func present(t *testing.T, k kernel, all []feature) map[string]bool {
	has := map[string]bool{}
	if k.model != "" {
		for _, f := range all {
			if versionLE(f.since, k.model) {
				has[f.name] = true
			}
		}
		return has
	}
	b, err := os.ReadFile(strings.TrimSuffix(k.path, ".btf") + ".features")
	if err != nil {
		t.Fatalf("%s: %v (scripts/core-btf.sh writes it)", k.name, err)
	}
	known := map[string]bool{}
	for _, f := range all {
		known[f.name] = true
	}
	for _, n := range strings.Fields(string(b)) {
		if !known[n] {
			t.Fatalf("%s.features: %q is not in features.txt (scripts/core-btf.sh refreshes it)", k.name, n)
		}
		has[n] = true
	}
	return has
}

func versionLE(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 2; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return true
}

// TestKernelFeatures reports, per kernel, which objects' capabilities are
// off or fall back for want of a kernel feature, and fails if a required
// object would be off, or if the kernel the tests run on (which runs all
// of them) lacks a feature (features.txt would be wrong).
func TestKernelFeatures(t *testing.T) {
	all := loadFeatures(t)
	for _, k := range kernels(t) {
		has := present(t, k, all)
		off := map[string]bool{}
		for _, f := range all {
			if has[f.name] {
				continue
			}
			for _, o := range f.objects {
				if f.effect == "off" {
					off[o] = true
					t.Logf("%s: capability %s off because the kernel lacks %s (%s, %s+)", k.name, o, f.what, f.name, f.since)
				} else {
					t.Logf("%s: %s falls back: the kernel lacks %s (%s, %s+)", k.name, o, f.what, f.name, f.since)
				}
				if required[o] {
					t.Errorf("%s: required object %s needs %s (%s)", k.name, o, f.name, f.what)
				}
			}
		}
		var on []string
		for o := range objects {
			if !off[o] {
				on = append(on, o)
			}
		}
		sort.Strings(on)
		t.Logf("%s: on: %s", k.name, strings.Join(on, " "))
		if strings.HasSuffix(k.name, "-running") && len(has) != len(all) {
			t.Errorf("%s: the kernel the tests run on lacks a feature of features.txt", k.name)
		}
	}
}

// checkProgram relocates prog against target and checks that every
// poisoned relocation has an existence check on the same field that says
// "absent" on this kernel.
func checkProgram(t *testing.T, spec *ebpf.CollectionSpec, prog *ebpf.ProgramSpec, target *btf.Spec) {
	var relos []*btf.CORERelocation
	for i := range prog.Instructions {
		if r := btf.CORERelocationMetadata(&prog.Instructions[i]); r != nil {
			relos = append(relos, r)
		}
	}
	if len(relos) == 0 {
		return
	}
	fixups, err := btf.CORERelocate(relos, []*btf.Spec{target}, binary.LittleEndian, spec.Types.TypeID)
	if err != nil {
		t.Fatalf("relocate: %v", err)
	}
	absent := map[string]bool{}
	for i, f := range fixups {
		if s := f.String(); strings.HasPrefix(s, "field_exists=") && strings.HasSuffix(s, "->0") {
			absent[reloKey(relos[i])] = true
		}
	}
	poisoned := 0
	for i, f := range fixups {
		if !strings.HasSuffix(f.String(), "=poison") {
			continue
		}
		poisoned++
		if !absent[reloKey(relos[i])] {
			t.Errorf("%s: reads a field this kernel lacks without bpf_core_field_exists on it (a new field? scripts/core-btf.sh refreshes testdata)", relos[i])
		}
	}
	t.Logf("%d relocations, %d absent fields guarded", len(relos), poisoned)
}
