// reasons_test.go: the four clients name the daemon's reasons as the wire
// package does, in the same order (a reason added to the wire and missed
// by a client fails here).
package examples_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
	"github.com/lanes-net/lanes/rt"
)

func TestReasonNamesAgree(t *testing.T) {
	var want []string
	for i := 0; i < 256 && wire.ReasonString(uint8(i)) != fmt.Sprintf("reason-%d", i); i++ {
		want = append(want, wire.ReasonString(uint8(i)))
		if got := rt.Reason(i).String(); got != want[i] {
			t.Errorf("rt.Reason(%d): %q, want %q", i, got, want[i])
		}
	}
	quoted := regexp.MustCompile(`"([a-z-]+)"`)
	for _, c := range []struct{ file, start, end string }{
		{"../include/lanes_rt.h", "static const char *const names[] = {", "};"},
		{"../clients/python/lanes_rt/__init__.py", "_REASON_NAMES = [", "]"},
		{"../clients/rust/src/lib.rs", "const REASON_NAMES:", "];"},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i := strings.Index(s, c.start)
		if i < 0 {
			t.Errorf("%s: no %q", c.file, c.start)
			continue
		}
		block := s[i+len(c.start):]
		block = block[:strings.Index(block, c.end)]
		var got []string
		for _, m := range quoted.FindAllStringSubmatch(block, -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s names the reasons %q, the wire %q", c.file, got, want)
		}
	}
}
