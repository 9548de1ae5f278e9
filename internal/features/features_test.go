// Tests that the probes agree with what iproute2's tc finds on the same kernel.
package features

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestQdiscProbeAgreesWithTC(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnlessCommand(t, "tc")
	r := Probe()
	ns := testutil.NewNetNS(t)
	for _, q := range qdiscKinds {
		if q.kind == "clsact" {
			continue
		}
		args := []string{"qdisc", "add", "dev", "lo", "root", "handle", "1:", q.kind}
		if q.kind == "tbf" {
			args = append(args, "rate", "1mbit", "burst", "10k", "latency", "10ms")
		}
		out, err := ns.Command("tc", args...).CombinedOutput()
		tcHas := err == nil
		if !tcHas && !strings.Contains(string(out), "nknown") && !strings.Contains(string(out), "not found") {
			t.Logf("tc %s: %s", q.kind, out) // other errors: options, not absence
			continue
		}
		_ = ns.Command("tc", "qdisc", "del", "dev", "lo", "root").Run()
		if got := r.Has("qdisc/" + q.kind); got != tcHas {
			t.Errorf("qdisc %s: probe says %v, tc says %v (%s)", q.kind, got, tcHas, strings.TrimSpace(string(out)))
		}
	}
	if !r.Has("qdisc/htb") {
		t.Log("HTB missing: lanes cannot run here")
	}
}

func TestCgroupV2Mount(t *testing.T) {
	mp := CgroupV2Mount()
	if mp == "" {
		t.Skip("no cgroup v2 mounted")
	}
	if !strings.HasPrefix(mp, "/") {
		t.Fatalf("mount point %q", mp)
	}
}

// TestCapCCProbeAgreesWithLoad: the doctor's congestion control probe says
// yes exactly when the datapath's loader can register it.
func TestCapCCProbeAgreesWithLoad(t *testing.T) {
	testutil.RequireRoot(t)
	r := Probe()
	var f *Feature
	for i := range r.Features {
		if r.Features[i].Name == CapCCFeature {
			f = &r.Features[i]
		}
	}
	if f == nil {
		t.Fatalf("no %q probe", CapCCFeature)
	}
	c, err := capcc.Load(structops.Name("features-test"), structops.Auto)
	if err == nil {
		c.Close()
	}
	if f.Present != (err == nil) {
		t.Errorf("probe says %v (%s), Load says %v", f.Present, f.Detail, err)
	}
}

// TestProbeWindowClamp: the probe agrees with the kernel's BTF marker
// (sockops.HaveWindowClamp: tcp_set_window_clamp came with the commit that
// let sock_ops set TCP_WINDOW_CLAMP, 5.11): allowed on 6.18, refused on
// 5.10; the same probe on an option bpf_setsockopt never allows
// (TCP_REPAIR) reports the refusal, so the probe can fail.
func TestProbeWindowClamp(t *testing.T) {
	testutil.RequireRoot(t)
	if CgroupV2Mount() == "" {
		t.Skip("no cgroup v2 mount")
	}
	err := ProbeWindowClamp()
	if marker := sockops.HaveWindowClamp(); marker != nil {
		t.Logf("kernel without TCP_WINDOW_CLAMP in sock_ops (%v): probe says %v", marker, err)
		if err == nil {
			t.Error("TCP_WINDOW_CLAMP allowed although the kernel's BTF lacks tcp_set_window_clamp")
		}
	} else if err != nil {
		t.Errorf("TCP_WINDOW_CLAMP: %v", err)
	}
	err = probeSockopt(unix.TCP_REPAIR)
	t.Logf("TCP_REPAIR: %v", err)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOPROTOOPT) {
		t.Errorf("TCP_REPAIR: %v (want the kernel's refusal)", err)
	}
}

// TestQdiscsLanesCouldUseSayWhy: for each qdisc a current kernel adds and
// lanes could build on (fq, fq_codel, cake, etf, netem, the BPF qdisc),
// doctor says what lanes does with it, present or not.
func TestQdiscsLanesCouldUseSayWhy(t *testing.T) {
	use := map[string]string{BPFQdiscFeature: probeBPFQdisc().Use}
	for _, q := range qdiscKinds {
		use["qdisc/"+q.kind] = q.use
	}
	for _, name := range []string{"qdisc/fq", "qdisc/fq_codel", "qdisc/cake", "qdisc/etf", "qdisc/netem", BPFQdiscFeature} {
		if use[name] == "" {
			t.Errorf("%s: doctor does not say what lanes does with it", name)
		}
	}
}

// TestProbeBPFQdisc: the probe reads the kernel's BTF; where that loads,
// it answers present or absent with the reason, never an error of its own.
func TestProbeBPFQdisc(t *testing.T) {
	f := probeBPFQdisc()
	t.Logf("%s: present %v %s", f.Name, f.Present, f.Detail)
	if !f.Present && !strings.HasPrefix(f.Detail, "not in this kernel") {
		if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err == nil {
			t.Errorf("BTF readable but the probe says: %s", f.Detail)
		}
	}
}
