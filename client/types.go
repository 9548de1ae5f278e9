// types.go: the daemon's wire types under their public names. They are
// the protocol's own types (internal/api), not copies: one shape each.
package client

import (
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// Lane is one of lanes' traffic classes; its text form is its name.
type Lane = lane.Lane

// The lanes, highest priority first.
const (
	Realtime    = lane.Realtime    // deadlines, EDF, always first
	Interactive = lane.Interactive // the default: what the user is doing
	Background  = lane.Background  // below best effort
)

// ParseLane parses a lane's name ("realtime", "interactive", "background"
// or their short forms).
func ParseLane(s string) (Lane, error) { return lane.Parse(s) }

type (
	// Status is the daemon's state (Client.Status).
	Status = api.Status
	// InterfaceStatus is what lanes does on one interface.
	InterfaceStatus = api.InterfaceStatus
	// LaneStats is one lane's counters on one interface.
	LaneStats = api.LaneStats
	// Netns names a network namespace.
	Netns = api.Netns
	// Flow is a registration key: destination, ports, protocol and
	// optionally the local address.
	Flow = api.Flow
	// FlowInfo is one registered flow, with its lane and who set it.
	FlowInfo = api.FlowInfo
	// UDPFlow is one UDP socket (QUIC included) with its lane and why.
	UDPFlow = api.UDPFlow
	// PolicyRefused is a reload that refused the policy file on disk
	// (Status.PolicyRefused): when, how many errors, the first of them.
	PolicyRefused = api.PolicyRefused
	// Moved is what one Move changed.
	Moved = api.Moved
	// OffError is a component that the policy leaves off (Component):
	// a state, not a failure.
	OffError = api.OffError
)
