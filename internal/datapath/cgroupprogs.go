// cgroupprogs.go: the programs the host attaches at the cgroup v2 root
// as their users reach them once loaded (host.go loads them): sock_ops'
// record of an app's congestion control (appcc.go), the live move's
// iterator (livecc.go) and the exe: rules' programs (execlane.go).
package datapath

import (
	"sync"

	"github.com/cilium/ebpf/link"

	"github.com/lanes-net/lanes/internal/bpf/execlane"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
)

// CgroupPrograms is the host's cgroup programs at work: each nil where
// its capability is off.
type CgroupPrograms struct {
	guard *guard
	ops   *sockops.Objects // lanes' own sock_ops and cgroup/setsockopt
	live  *link.Iter       // lanes_live_cc's link (CapLiveCC)
	exec  *execlane.Lanes  // the exe: rules' programs (CapExecLane)
	ccMu  sync.Mutex       // one allow-list reading at a time (appcc.go)
}
