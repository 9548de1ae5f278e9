// doctor_test.go: doctor's last line is one verdict: whether lanes works
// here, with which lanes, and what is missing for the rest; and its
// default lines fit 100 columns.
package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/sched"
)

func TestDoctorVerdict(t *testing.T) {
	all := &features.Report{Features: []features.Feature{
		{Name: features.LedbatFeature, Present: true}, {Name: features.WindowClampFeature, Present: true},
		{Name: "qdisc/htb", Present: true, Needed: true}}}
	noClamp := &features.Report{Features: []features.Feature{{Name: "qdisc/htb", Present: true, Needed: true}}}
	noHTB := &features.Report{Features: []features.Feature{{Name: "qdisc/htb", Needed: true}}}
	for _, c := range []struct {
		r       *features.Report
		missing int
		rtd     bool
		want    string
	}{
		{all, 0, true, "lanes will work here: all lanes"},
		{all, 0, false, "lanes will work here: interactive, background; without lanes-rtd: no realtime lane"},
		{noClamp, 0, true, "lanes will work here: all lanes; without struct_ops and sock_ops: background uploads held back " +
			"on the device only; without a window clamp: background downloads not held back"},
		{noHTB, 1, true, "lanes will NOT work here: missing qdisc/htb"},
	} {
		if got := verdict(c.r, c.missing, c.rtd); got != c.want {
			t.Errorf("verdict: %q\nwant      %q", got, c.want)
		}
	}
}

// TestDoctorFits100Columns: a feature name of 88 characters and notes of
// 300 made lines of 326; by default each line fits, the verdict last.
func TestDoctorFits100Columns(t *testing.T) {
	long := strings.Repeat("a note that goes on and on ", 12)
	r := &features.Report{Kernel: "6.1", Features: []features.Feature{
		{Name: "lanes process events (tracepoints: the task engine outside the initial network namespace)", Present: true, Use: long},
		{Name: "qdisc/fq", Fallback: long}}}
	var b strings.Builder
	fw := newFitWriter(&b)
	writeDoctor(fw, r, sched.KernelRT{PreemptNote: long}, false)
	fw.Close()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > outputWidth {
			t.Errorf("a line of %d characters: %s", n, l)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "lanes will work here: ") {
		t.Errorf("last line %q, want the verdict", last)
	}
}
