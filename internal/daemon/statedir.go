// statedir.go: where the daemon keeps what must outlive a crash or a stop
// of its unit — the device queue settings its datapath changed (to restore
// them after SIGKILL) and the coop controllers' replay state.
//
// DefaultStateDir is /var/lib/lanes (systemd: StateDirectory=lanes, which
// also sets $STATE_DIRECTORY; the runtime directory /run/lanes is removed
// when the unit stops, which lost these files). $STATE_DIRECTORY, when set,
// wins (its first entry); tests point it at a temporary directory.
package daemon

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/lanes-net/lanes/internal/datapath"
)

// DefaultStateDir is the state directory unless $STATE_DIRECTORY names one.
const DefaultStateDir = "/var/lib/lanes"

// StateDir is the state directory in use.
func StateDir() string {
	if s := os.Getenv("STATE_DIRECTORY"); s != "" {
		return strings.Split(s, ":")[0]
	}
	return DefaultStateDir
}

// useStateDir points the datapath's crash state and the coop replay state
// at the state directory (start and `lanes reset`).
func useStateDir() {
	dir := StateDir()
	datapath.StateDir = filepath.Join(dir, "datapath")
	CoopStateDir = filepath.Join(dir, "coop")
}
