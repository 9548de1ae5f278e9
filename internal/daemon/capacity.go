// capacity.go: whether a policy's rules fit the classifier's maps, checked
// the same way by `lanes daemon --check`, at start and at reload (which
// then keeps the running policy whole). Without it a policy of 100,000
// rules passed --check, and the daemon failed on its 4,097th destination
// rule with one "no space left on device" line per rule left; a reload to
// 5,000 applied 4,096 and kept retrying.
package daemon

import (
	"fmt"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
)

// reservedCgroups are the lane cgroup map's entries kept for the lane
// cgroups and the lane groups nested in host cgroups (cgmove.go).
const reservedCgroups = 256

// CheckCapacity refuses a policy whose rules of one kind exceed what the
// classifier's map for them holds (tuples share theirs with the API's
// registrations, apiRegs).
func CheckCapacity(p *policy.Policy) error {
	caps, err := classifier.Capacities()
	if err != nil {
		return err
	}
	var tuples, dsts, cgroups, uids int
	for _, m := range p.Matches {
		switch m.Kind {
		case policy.MatchTuple:
			tuples++
		case policy.MatchDst:
			dsts++
		case policy.MatchCgroup:
			cgroups++
		case policy.MatchUID:
			uids++
		}
	}
	for _, c := range []struct {
		what     string
		n, limit int
	}{
		{"flow (3- and 5-tuple) rules", tuples, int(caps["lanes_tuple"]) - apiRegs},
		{"destination rules", dsts, int(caps["lanes_dst"])},
		{"cgroup rules", cgroups, int(caps["lanes_cgroup"]) - reservedCgroups - len(lane.All)},
		{"uid rules", uids, int(caps["lanes_uid"])},
	} {
		if c.n > c.limit {
			return fmt.Errorf("policy %s: %d %s, the datapath holds %d", p.Source, c.n, c.what, c.limit)
		}
	}
	return nil
}
