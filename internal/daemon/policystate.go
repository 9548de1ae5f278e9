// policystate.go: which policy runs and the last reload refused, for
// status: a refused reload keeps the running policy, and the one on disk
// is not it until a reload takes it.
package daemon

import (
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/config"
)

// policyState is when the running policy was read, and the last refusal of
// the file on disk since (nil once a reload takes it).
type policyState struct {
	loadedAt time.Time
	refused  *api.PolicyRefused
}

// refuseReload logs a refused reload and keeps it for status.
func (d *Daemon) refuseReload(err error) {
	d.log.Error("policy reload refused, keeping the running policy", "err", err)
	errs := config.Each(err)
	r := &api.PolicyRefused{At: time.Now().UTC().Format(time.RFC3339), Errors: len(errs)}
	if len(errs) > 0 {
		r.First = errs[0].Error()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r.Running = d.polState.loadedAt.UTC().Format(time.RFC3339)
	d.polState.refused = r
}
