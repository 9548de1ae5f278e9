// Package coretest checks that every lanes BPF object relocates (CO-RE)
// against the BTF of the kernels lanes supports, without loading anything:
// each program's relocations are resolved against a kernel's BTF, and a
// field that kernel lacks may be read only behind its own
// bpf_core_field_exists check (otherwise the verifier would meet the
// poisoned instruction and refuse the whole program).
//
// testdata holds minimal BTF (`bpftool gen min_core_btf`: only the types
// the objects relocate against, a few KB each) of:
//   - linux-6.1.*-debian.btf: Debian 12's linux-image-6.1.0-N-cloud-amd64 (the newest)
//     (vmlinux extracted from the package's bzImage);
//   - linux-6.18.44-running.btf: the kernel these objects were built on;
//   - models/linux-5.10.o, models/linux-5.15.o: MODELS of those kernels'
//     BTF (no 5.10 or 5.15 kernel package is in this project's package
//     sources): the 6.1 types with the layout changes that matter here
//     taken back (struct cgroup ancestor ids, the sock_cgroup_data union,
//     tcp_probe without family); models/*.c say which and are rebuilt
//     with `clang -target bpf -g -O2 -c linux-X.c -o linux-X.o`.
//
// scripts/core-btf.sh regenerates both after an object uses new kernel
// types. To add a kernel: extract its vmlinux (or take /sys/kernel/btf/vmlinux on
// it) and run, from internal/bpf,
//
//	bpftool gen min_core_btf VMLINUX coretest/testdata/linux-X.Y-NAME.btf \
//	    sockops/sockops_bpfel.o tcpevents/tcpevents_bpfel.o \
//	    capcc/capcc_bpfel.o ledbat/ledbat_bpfel.o classifier/classifier_bpfel.o
//
// after `make generate` (the objects decide which types are kept).
package coretest

import (
	"encoding/binary"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/tcpevents"
)

var objects = map[string]func() (*ebpf.CollectionSpec, error){
	"classifier": classifier.LoadClassifier,
	"sockops":    sockops.LoadSockops,
	"capcc":      capcc.LoadCapcc,
	"ledbat":     ledbat.LoadLedbat,
	"tcpevents":  tcpevents.LoadSpec,
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

func TestObjectsRelocateOnSupportedKernels(t *testing.T) {
	kernels, err := filepath.Glob("testdata/*.btf")
	models, _ := filepath.Glob("testdata/models/*.o")
	kernels = append(kernels, models...)
	if err != nil || len(kernels) == 0 {
		t.Fatalf("no kernel BTF in testdata: %v", err)
	}
	for _, path := range kernels {
		target, err := btf.LoadSpec(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		kernel := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".btf"), ".o")
		if strings.Contains(path, "models") {
			kernel = "model-" + kernel
		}
		for name, load := range objects {
			spec, err := load()
			if err != nil {
				t.Fatal(err)
			}
			for pname, prog := range spec.Programs {
				t.Run(kernel+"/"+name+"/"+pname, func(t *testing.T) {
					checkProgram(t, spec, prog, target)
				})
			}
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
