// testnames_test.go: a test is named for what it checks; an audit's id
// (D1, N7...) belongs in its comment, not in its name.
package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var auditName = regexp.MustCompile(`(?m)^func (Test[DN][0-9]+[a-z]?[A-Z]\w*)\(`)

func TestNoTestNamedForAnAuditID(t *testing.T) {
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() && (e.Name() == ".git" || e.Name() == "bin") {
			return skipDir(err)
		}
		if e.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range auditName.FindAllStringSubmatch(string(b), -1) {
			t.Errorf("%s: %s is named for an audit id: name it for what it checks, the id in its comment",
				rel(root, p), m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
