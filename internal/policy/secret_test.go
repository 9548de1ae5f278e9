// secret_test.go: the coop group key is a secret: a policy file or key
// file holding it that others may read is refused.
package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadableCoopKeyRefused (audit N19): policy.yaml was installed 0644 and a
// key_file's mode was not checked: a local user read the key and forged a
// keyed announcement that removed a peer for 60 s. Fix: a policy holding
// coop.key, and a key_file, must not be readable by group or others.
func TestReadableCoopKeyRefused(t *testing.T) {
	dir := t.TempDir()
	const key = "00112233445566778899aabbccddeeff"
	keyFile := filepath.Join(dir, "coop.key")
	inline := "coop:\n  enabled: true\n  key: " + key + "\n"
	viaFile := "coop:\n  enabled: true\n  key_file: " + keyFile + "\n"
	for _, c := range []struct {
		name          string
		policy        string
		polMode, kMod os.FileMode
		ok            bool
	}{
		{"inline key, policy 0644", inline, 0o644, 0o600, false},
		{"inline key, policy 0640", inline, 0o640, 0o600, false},
		{"inline key, policy 0600", inline, 0o600, 0o600, true},
		{"key_file 0644", viaFile, 0o644, 0o644, false},
		{"key_file 0600", viaFile, 0o644, 0o600, true},
	} {
		pol := filepath.Join(dir, "policy.yaml")
		os.Remove(pol)
		if err := os.WriteFile(pol, []byte(c.policy), c.polMode); err != nil {
			t.Fatal(err)
		}
		os.Remove(keyFile)
		if err := os.WriteFile(keyFile, []byte(key), c.kMod); err != nil {
			t.Fatal(err)
		}
		p, err := Load(pol, false)
		if err == nil {
			_, err = p.Coop.LoadKey()
		}
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want accepted %v", c.name, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("%s: %v does not say what to do", c.name, err)
		}
	}
}
