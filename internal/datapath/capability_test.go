// capability_test.go: the docs' lists of the optional capabilities are
// the table's (datapath.Capabilities): ARCHITECTURE.md's list no more, no
// fewer; datapath.md's paragraph names each one.
package datapath

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// listed is the set of names the paragraph of doc starting at start and
// ending at end writes as words matching the capabilities' form.
func listed(t *testing.T, doc, start, end string, quoted bool) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/" + doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, start)
	j := strings.Index(text[max(i, 0):], end)
	if i < 0 || j < 0 {
		t.Fatalf("docs/%s: no paragraph from %q to %q", doc, start, end)
	}
	word := `\b[a-z]+(_[a-z]+)+\b|\brledbat\b`
	if quoted {
		word = "`(" + word + ")`"
	}
	var out []string
	for _, m := range regexp.MustCompile(word).FindAllString(text[i:i+j], -1) {
		m = strings.Trim(m, "`")
		if !slices.Contains(out, m) && m != "rledbat_daemon" {
			out = append(out, m)
		}
	}
	return out
}

func TestCapabilityListsAreTheTable(t *testing.T) {
	var want []string
	for _, c := range CapabilityNames() {
		want = append(want, string(c))
	}
	slices.Sort(want)
	for _, l := range []struct {
		doc, start, end string
		quoted          bool
	}{
		{"datapath.md", "Optional capabilities turn off alone", "Only the classifier is required", true},
		{"ARCHITECTURE.md", "optional capabilities (", ") turn off alone", false},
	} {
		got := listed(t, l.doc, l.start, l.end, l.quoted)
		slices.Sort(got)
		if l.quoted { // the reference's prose also quotes helpers (bpf_setsockopt)
			got = slices.DeleteFunc(got, func(n string) bool { return !slices.Contains(want, n) })
		}
		if !slices.Equal(got, want) {
			t.Errorf("docs/%s lists %v, the table %v", l.doc, got, want)
		}
	}
}
