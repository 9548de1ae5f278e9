// handlers.go: the daemon's side of the API (apiserver.Handler and its
// optional interfaces), one owner, apiHandlers: the requests are answered
// from the kernel state (under its lock), the registrations, the moves and
// the components, and a move goes through the lane mover. The answers'
// code is beside what it answers: daemon.go (status, flows, move-pid),
// register.go, cookies.go, explain.go, udpflows.go, components.go.
package daemon

import (
	"log/slog"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
)

// apiHandlers answers the API's requests.
type apiHandlers struct {
	log      *slog.Logger
	env      *env
	version  string
	started  time.Time
	netns    api.Netns // the namespace this daemon manages
	kernel   *kernelState
	mover    *laneMover
	regs     *registrations
	moves    *moves
	comps    *components
	polState *policyState

	// facts: the sockets' addresses and owners for socket-lanes (explain.go)
	facts socketFacts
	// udp: the last listing of the UDP flows (udpflows.go)
	udp udpListing
	// rates: the account's rates between status calls (account_rates.go)
	rates accountRates
}

var (
	_ apiserver.Handler = (*apiHandlers)(nil)
)

// newAPIHandlers answers for d's owners.
func newAPIHandlers(d *Daemon) *apiHandlers {
	return &apiHandlers{log: d.log, env: &d.env, version: d.opts.Version, started: time.Now(), kernel: d.kernel,
		mover: d.mover, regs: d.regs, moves: d.moves, comps: d.comps, polState: d.polState}
}
