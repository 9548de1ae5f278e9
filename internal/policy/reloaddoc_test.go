// reloaddoc_test.go: docs/policy.md's reload paragraph names each key of
// the reload classes' table (reloadClasses) in its class's list.
package policy

import (
	"os"
	"strings"
	"testing"
)

func TestReloadDocIsTheTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	applied := strings.Index(text, "\n- applied: ")
	refused := strings.Index(text, "\n- refused, naming the key")
	end := strings.Index(text[max(refused, 0):], "\n\n")
	if applied < 0 || refused < applied || end < 0 {
		t.Fatal("docs/policy.md: no reload lists (- applied: ..., - refused, naming the key ...)")
	}
	lists := map[ReloadClass]string{ReloadApplied: text[applied:refused], ReloadRestart: text[refused : refused+end]}
	for path, c := range reloadClasses {
		name := path[strings.LastIndex(path, ".")+1:]
		if !strings.Contains(lists[c], "`"+name+"`") {
			t.Errorf("docs/policy.md: %s (%s) not in the %s list", path, c, c)
		}
		for other, list := range lists {
			if other != c && strings.Contains(list, "`"+name+"`") {
				t.Errorf("docs/policy.md: %s (%s) in the %s list", path, c, other)
			}
		}
	}
}
