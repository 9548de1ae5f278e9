// events.go: the events stream's records: what changed in the daemon, sent
// as it changes to each connection that asked with OpEvents.
package api

import "time"

// Event kinds.
const (
	EventRegistered   = "registered"   // a flow registration appeared (Flow)
	EventUnregistered = "unregistered" // a flow registration went (Flow)
	EventComponent    = "component"    // a component's state line changed (Name, Text)
	EventDaemon       = "daemon"       // the daemon's version, policy or start (Text)
)

// Event is one change.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Flow *FlowInfo `json:"flow,omitempty"`
	Name string    `json:"name,omitempty"`
	Text string    `json:"text,omitempty"`
}
