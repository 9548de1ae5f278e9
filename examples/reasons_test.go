// reasons_test.go: the four clients name the daemon's reasons as the wire
// package does, in the same order (a reason added to the wire and missed
// by a client fails here), and say what fixes an unusable lane in the
// words of lanes_rt.h's table of messages.
package examples_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/client"
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

// TestMessagesAgree: the messages that name what fixes an unusable lane
// (the lane off, the daemon not running, not granted) are lanes_rt.h's
// LANES_RT_MSG_* in the Go (rt, and the control client's no-daemon error),
// Python and Rust clients, word for word.
func TestMessagesAgree(t *testing.T) {
	h, err := os.ReadFile("../include/lanes_rt.h")
	if err != nil {
		t.Fatal(err)
	}
	header := strings.ReplaceAll(string(h), "\\\n", "")
	py, err := os.ReadFile("../clients/python/lanes_rt/__init__.py")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := os.ReadFile("../clients/rust/src/lib.rs")
	if err != nil {
		t.Fatal(err)
	}
	rust := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(rs), "")
	for _, m := range []struct{ c, goMsg, name string }{
		{"LANES_RT_MSG_OFF", rt.MsgLaneOff, "MSG_LANE_OFF"},
		{"LANES_RT_MSG_NO_DAEMON", rt.MsgNoDaemon, "MSG_NO_DAEMON"},
		{"LANES_RT_MSG_NOT_GRANTED", rt.MsgNotGranted, "MSG_NOT_GRANTED"},
	} {
		line := regexp.MustCompile(`#define ` + m.c + `\s+(.*)`).FindStringSubmatch(header)
		if line == nil {
			t.Errorf("lanes_rt.h: no %s", m.c)
			continue
		}
		want := joinLiterals(line[1])
		if m.goMsg != want {
			t.Errorf("rt: %q, lanes_rt.h's %s %q", m.goMsg, m.c, want)
		}
		if m.c == "LANES_RT_MSG_NO_DAEMON" && client.ErrNoDaemon.Error() != want {
			t.Errorf("client.ErrNoDaemon %q, lanes_rt.h's %s %q", client.ErrNoDaemon, m.c, want)
		}
		def := regexp.MustCompile(`(?s)\n` + m.name + ` = (\(.*?\)|"[^\n]*")\n`).FindStringSubmatch(string(py))
		if def == nil || joinLiterals(def[1]) != want {
			t.Errorf("clients/python: %s %v, lanes_rt.h's %q", m.name, def, want)
		}
		def = regexp.MustCompile(`pub const ` + m.name + `: &str = (".*?");`).FindStringSubmatch(rust)
		if def == nil || joinLiterals(def[1]) != want {
			t.Errorf("clients/rust: %s %v, lanes_rt.h's %q", m.name, def, want)
		}
	}
}

// joinLiterals concatenates the double-quoted literals in s (none holds
// a quote or an escape).
func joinLiterals(s string) string {
	var b strings.Builder
	for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(s, -1) {
		b.WriteString(m[1])
	}
	return b.String()
}
