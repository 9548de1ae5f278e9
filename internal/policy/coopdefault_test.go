// The default policy lists every key of the `coop:` section with its
// default, and docs/policy.md names each: a key added, moved or removed
// shows here.
package policy

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/lanes-net/lanes/internal/config"
)

// yamlKeys are the yaml names of a struct type's fields.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// mappingKeys are a YAML mapping's keys, and its value under key (nil:
// none).
func mappingKeys(n *yaml.Node, key string) ([]string, *yaml.Node) {
	var keys []string
	var val *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
		if n.Content[i].Value == key {
			val = n.Content[i+1]
		}
	}
	return keys, val
}

func TestDefaultListsCoopKeys(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal(DefaultYAML(), &root); err != nil {
		t.Fatal(err)
	}
	_, section := mappingKeys(root.Content[0], "coop")
	if section == nil {
		t.Fatal("the default policy has no coop section")
	}
	keys, safety := mappingKeys(section, "safety")
	if want := yamlKeys(reflect.TypeOf(config.Coop{})); !reflect.DeepEqual(keys, want) {
		t.Errorf("coop keys listed:\n%v\nwant (config.Coop):\n%v", keys, want)
	}
	safetyKeys, _ := mappingKeys(safety, "")
	if want := yamlKeys(reflect.TypeOf(config.CoopSafety{})); !reflect.DeepEqual(safetyKeys, want) {
		t.Errorf("coop.safety keys listed:\n%v\nwant (config.CoopSafety):\n%v", safetyKeys, want)
	}
	got, want := Default().Coop, config.DefaultCoop()
	if len(got.UnicastPeers) == 0 && len(got.Rules) == 0 {
		got.UnicastPeers, got.Rules = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the default policy's coop section\n%+v\nwant config.DefaultCoop()\n%+v", got, want)
	}
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(string(doc), "| `"+k+"`") {
			t.Errorf("docs/policy.md has no row for coop key `%s`", k)
		}
	}
	for _, k := range safetyKeys {
		if !strings.Contains(string(doc), "| `safety."+k+"`") {
			t.Errorf("docs/policy.md has no row for coop key `safety.%s`", k)
		}
	}
}
