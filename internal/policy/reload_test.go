package policy

import (
	"reflect"
	"strings"
	"testing"
)

// keyPaths lists the full path of every yaml key reachable from t ("coop.rate",
// "rules[].lane"), inline structs flattened.
func keyPaths(t reflect.Type, prefix string, into map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice {
		keyPaths(t.Elem(), prefix+"[]", into)
		return
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || (!f.IsExported() && !strings.Contains(opts, "inline")) {
			continue
		}
		p := prefix
		if name != "" {
			if p != "" && !strings.HasSuffix(p, "[]") {
				p += "."
			} else if strings.HasSuffix(p, "[]") {
				p += "."
			}
			p += name
			into[p] = true
		}
		keyPaths(f.Type, p, into)
	}
}

// TestEveryKeyHasAReloadClass walks every key of the policy: each is
// applied by a reload or refused by it with its name; none is skipped.
func TestEveryKeyHasAReloadClass(t *testing.T) {
	paths := map[string]bool{}
	keyPaths(reflect.TypeOf(Policy{}), "", paths)
	if len(paths) < 60 {
		t.Fatalf("the walk found only %d keys", len(paths))
	}
	n := map[ReloadClass]int{}
	for p := range paths {
		c := ReloadClassOf(p)
		n[c]++
		if c == ReloadUnknown {
			t.Errorf("key %s: no reload class (a reload would skip it silently)", p)
		}
	}
	t.Logf("%d keys: %d applied by a reload, %d refused (restart), %d silently skipped", len(paths), n[ReloadApplied], n[ReloadRestart], n[ReloadUnknown])
}

// TestRestartKeysRefusedByName: every key only a restart applies, changed
// in a reload, is refused with its name and line; the applied ones pass.
func TestRestartKeysRefusedByName(t *testing.T) {
	running := RestartValues(Default())
	if len(running) == 0 {
		t.Fatal("no restart keys")
	}
	changed := map[string]string{
		"background.congestion_control": "congestion_control: system",
		"background.target_delay":       "target_delay: 50ms",
		"background.receive_window":     "receive_window: system",
		"background.yield":              "yield: false",
	}
	// every key of the policy a restart applies (a new key of the
	// background section too: its class comes from the section's, and
	// only the keys RestartValues compares are refused)
	paths := map[string]bool{}
	keyPaths(reflect.TypeOf(Policy{}), "", paths)
	for k := range paths {
		if ReloadClassOf(k) == ReloadRestart && strings.Contains(k, ".") && changed[k] == "" {
			t.Errorf("restart key %s: no changed value in this test", k)
		}
	}
	for k, line := range changed {
		p, err := Parse("p.yaml", []byte("interfaces: [{name: eth0}]\nbackground:\n  "+line+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = RestartChanges(running, p)
		if err == nil || !strings.Contains(err.Error(), "p.yaml:3: "+k+": changed") {
			t.Errorf("%s changed: %v, want it refused naming p.yaml:3 and the key", k, err)
		}
	}
	p, err := Parse("p.yaml", []byte("interfaces: [{name: eth0}]\ncoop: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := RestartChanges(running, p); err != nil {
		t.Errorf("a policy changing only applied keys refused: %v", err)
	}
}
