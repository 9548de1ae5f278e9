// statedir.go: where the daemon keeps what must outlive a crash or a stop
// of its unit — the device queue settings its datapath changed (to restore
// them after SIGKILL), the coop controllers' replay state and the running
// instances' records. The directory comes in through Options.StateDir (and
// Reset's argument); its parts are named here, once, and handed to the
// datapath (HostConfig.StateDir) and coop (config.Coop.StateFile).
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
)

// DefaultStateDir is the state directory unless $STATE_DIRECTORY names one.
const DefaultStateDir = "/var/lib/lanes"

// StateDir is the state directory the environment names: $STATE_DIRECTORY's
// first entry, else DefaultStateDir.
func StateDir() string {
	if s := os.Getenv("STATE_DIRECTORY"); s != "" {
		return strings.Split(s, ":")[0]
	}
	return DefaultStateDir
}

// stateDirs are the state directory's parts.
type stateDirs struct {
	root      string
	datapath  string // the device queues' state files (datapath.HostConfig.StateDir)
	coop      string // the coop controllers' replay state
	instances string // the instances' records (instance.go)
}

// stateDirsAt names the parts of root ("": StateDir()).
func stateDirsAt(root string) stateDirs {
	if root == "" {
		root = StateDir()
	}
	return stateDirs{root: root, datapath: filepath.Join(root, "datapath"), coop: filepath.Join(root, "coop"),
		instances: filepath.Join(root, "instances")}
}
