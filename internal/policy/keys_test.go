// Tests that every key a policy can hold is named where users look for it:
// the default policy (`lanes daemon --print-default-policy`) and
// docs/policy.md, and that the default policy's values are the built-in
// defaults.
package policy

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/config"
)

// policyKeys lists every yaml key reachable from t, structs and slices of
// structs followed, inline structs flattened.
func policyKeys(t reflect.Type, into map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !strings.Contains(opts, "inline")) {
			continue
		}
		if name != "" {
			into[name] = true
		}
		policyKeys(f.Type, into)
	}
}

func allPolicyKeys() []string {
	keys := map[string]bool{}
	policyKeys(reflect.TypeOf(Policy{}), keys)
	var out []string
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestPolicyKeysFound(t *testing.T) {
	keys := allPolicyKeys()
	if len(keys) < 60 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
	for _, k := range []string{"interfaces", "device_queue", "target_delay", "watchdog", "pm_latency_us", "when"} {
		if !contains(keys, k) {
			t.Errorf("key %q not found by the walk", k)
		}
	}
}

// TestDefaultPolicyNamesEveryKey: every key appears in the default policy,
// as a key or, for list items, in a comment.
func TestDefaultPolicyNamesEveryKey(t *testing.T) {
	text := string(DefaultYAML())
	for _, k := range allPolicyKeys() {
		asKey := regexp.MustCompile(`(?m)^[ #-]*` + k + `:`)
		asWord := regexp.MustCompile(`#.*\b` + k + `\b`)
		if !asKey.MatchString(text) && !asWord.MatchString(text) {
			t.Errorf("the default policy does not name %q", k)
		}
	}
}

// TestPolicyDocNamesEveryKey: docs/policy.md has every key in backquotes,
// alone or as part of a dotted path (`task_safety.watchdog.starve`).
func TestPolicyDocNamesEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range allPolicyKeys() {
		named := regexp.MustCompile("`([a-z_]+\\.)*" + k + "(\\.[a-z_.]+)?:?`")
		if !named.Match(doc) {
			t.Errorf("docs/policy.md does not name `%s`", k)
		}
	}
}

// TestDefaultSectionsAreBuiltIn: the values the default policy shows are
// the ones an absent section gets.
func TestDefaultSectionsAreBuiltIn(t *testing.T) {
	p := Default()
	if !reflect.DeepEqual(p.Background, config.DefaultBackground()) {
		t.Errorf("background = %+v, built in %+v", p.Background, config.DefaultBackground())
	}
	if !reflect.DeepEqual(p.Safety, config.DefaultTaskSafety()) {
		t.Errorf("task_safety = %+v, built in %+v", p.Safety, config.DefaultTaskSafety())
	}
	if p.Access.Group != "" || len(p.Tasks) != 0 || len(p.Rules) != 0 {
		t.Errorf("default access/tasks/rules = %+v %v %v", p.Access, p.Tasks, p.Rules)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestDefaultYAMLWithout: a section dropped from the default policy can be
// appended again in a caller's own version; the rest is kept.
func TestDefaultYAMLWithout(t *testing.T) {
	text := string(DefaultYAMLWithout("background")) + "background:\n  yield: false\n"
	p, err := Parse("lab.yaml", []byte(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	if p.Background.Yield || p.Background.CongestionControl != config.BackgroundLedbat {
		t.Errorf("background = %+v", p.Background)
	}
	if !reflect.DeepEqual(p.Safety, config.DefaultTaskSafety()) || p.Realtime.Socket == "" || len(p.Interfaces) != 1 {
		t.Errorf("other sections lost: %+v %+v %+v", p.Safety, p.Realtime, p.Interfaces)
	}
	if _, err := Parse("twice.yaml", append(DefaultYAML(), "background:\n  yield: false\n"...)); err == nil {
		t.Errorf("a second background section was accepted")
	}
}
