// reasons_test.go: the reasons' names are the wire's table (reasonNames)
// wherever else they are written: docs/realtime.md "Reasons" and the Python
// and Rust clients' lists (the C header is checked by rtlane's
// TestWireMatchesHeader).
package wire

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// wantNames are the table's names by code, 0 up.
func wantNames() []string {
	var out []string
	for r := 0; r < len(reasonNames); r++ {
		out = append(out, ReasonString(uint8(r)))
	}
	return out
}

func readRepo(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClientsNameReasonsAsTheWire(t *testing.T) {
	want := strings.Join(wantNames(), " ")
	for _, c := range []struct{ path, start string }{
		{"clients/python/lanes_rt/__init__.py", "_REASON_NAMES = ["},
		{"clients/rust/src/lib.rs", "const REASON_NAMES: [&str; "},
	} {
		text := readRepo(t, c.path)
		i := strings.Index(text, c.start)
		j := strings.Index(text[max(i, 0):], "]\n")
		if i < 0 || j < 0 {
			t.Fatalf("%s: no %q list", c.path, c.start)
		}
		body := text[i+len(c.start) : i+j]
		body = body[strings.Index(body, "[")+1:] // Rust: past the length's "]"
		var got []string
		for _, m := range regexp.MustCompile(`"([a-z-]+)"`).FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s names %v, the wire %v", c.path, got, want)
		}
	}
}

func TestDocNamesReasonsAsTheWire(t *testing.T) {
	text := readRepo(t, "docs/realtime.md")
	i := strings.Index(text, "\nReasons: ")
	j := strings.Index(text[max(i, 0):], "\n\n")
	if i < 0 || j < 0 {
		t.Fatal(`docs/realtime.md: no "Reasons:" paragraph`)
	}
	para := strings.Join(strings.Fields(text[i:i+j]), " ")
	for r, name := range wantNames() {
		form := fmt.Sprintf("%d `%s`", r, name)
		if r == 0 {
			form = "0 none"
		}
		if !strings.Contains(para, form) {
			t.Errorf("docs/realtime.md's reasons lack %q", form)
		}
	}
	if strings.Contains(para, fmt.Sprintf(" %d `", len(reasonNames))) {
		t.Errorf("docs/realtime.md names a reason %d the wire lacks", len(reasonNames))
	}
}
