// policystate.go: which policy runs and the last reload refused, for
// status: a refused reload keeps the running policy, and the one on disk
// is not it until a reload takes it. policyState owns its lock, taken
// after the daemon's; the daemon swaps the policy itself (daemon.go).
package daemon

import (
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/config"
)

// policyState is when the running policy was read, and the last refusal of
// the file on disk since (nil once a reload takes it).
type policyState struct {
	mu       sync.Mutex
	loadedAt time.Time
	refused  *api.PolicyRefused
}

func newPolicyState() *policyState {
	return &policyState{loadedAt: time.Now()}
}

// taken records that the running policy was read now.
func (p *policyState) taken() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loadedAt, p.refused = time.Now(), nil
}

// refuseReload logs a refused reload and keeps it for status.
func (d *Daemon) refuseReload(err error) {
	d.log.Error("policy reload refused, keeping the running policy", "err", err)
	d.polState.refuse(err)
}

// refuse keeps a refused reload for status.
func (p *policyState) refuse(err error) {
	errs := config.Each(err)
	r := &api.PolicyRefused{At: time.Now().UTC().Format(time.RFC3339), Errors: len(errs)}
	if len(errs) > 0 {
		r.First = errs[0].Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Running = p.loadedAt.UTC().Format(time.RFC3339)
	p.refused = r
}

// lastRefused is the last reload refused since the running policy was read.
func (p *policyState) lastRefused() *api.PolicyRefused {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}
