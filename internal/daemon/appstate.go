// appstate.go: Android's app states as a rule source (policy `android:`
// rules, internal/appstate). A component sleeps on the writes into
// Android's process groups; after each it reads every uid's state, and
// when one changed the desired state gets one uid entry per uid an
// android rule matches (state.go), applied as any diff: new sockets take
// the lane from the uid map at connect, and the open sockets of each
// changed uid follow at once (rulefollow.go, by cookie through
// livemove.go). An explicit `uid:` rule for the same uid wins.
package daemon

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/lanes-net/lanes/internal/appstate"
	"github.com/lanes-net/lanes/internal/policy"
)

// androidRules are the policy's android matches, uid-naming ones first.
func androidRules(pol *policy.Policy) []policy.Match {
	var withUID, apps []policy.Match
	for _, m := range pol.Matches {
		switch {
		case m.Kind != policy.MatchAndroid:
		case m.HasUID:
			withUID = append(withUID, m)
		default:
			apps = append(apps, m)
		}
	}
	return append(withUID, apps...)
}

// addAppStates puts the uid entries the android rules give the uids'
// current states into w, leaving the uids a uid rule names.
func (ks *kernelState) addAppStates(pol *policy.Policy, w desired) {
	rules := androidRules(pol)
	for uid, st := range ks.appStates {
		if _, ok := w.UIDs[uid]; ok {
			continue
		}
		for _, m := range rules {
			if m.Android == st && (m.HasUID && m.UID == uid || !m.HasUID && appstate.IsApp(uid)) {
				w.UIDs[uid] = entry{m.Lane, fmt.Sprintf("policy:%s (android %s)", m.Rule, st)}
				break
			}
		}
	}
}

// newAppState is the android component, nil without android rules. One
// that cannot start (no groups under the root yet) waits and retries.
func (d *Daemon) newAppState(pol *policy.Policy) *component {
	if len(androidRules(pol)) == 0 {
		return nil
	}
	root := d.opts.AndroidCpuset
	if root == "" {
		root = appstate.DefaultRoot
	}
	return superviseWaiting(d.log, "android", func() (*runner, error) {
		w, err := appstate.Watch(root)
		if err != nil {
			return nil, err
		}
		r := appstate.Reader{Root: root, Proc: "/proc"}
		var now atomic.Pointer[appStateStatus] // status reads it under the kernel state's lock: none of its own
		now.Store(&appStateStatus{States: map[uint32]string{}})
		run := func(ctx context.Context) error {
			for {
				woke := time.Now()
				st, stages, err := d.readAppStates(r)
				if err != nil {
					return err
				}
				next := *now.Load()
				next.States = st
				if stages != nil {
					next.Changes++
					next.Last = time.Now()
					stages.Woke = woke
					next.Stages = stages
				}
				now.Store(&next)
				if err := w.Wait(ctx); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
		}
		status := func() string {
			s := now.Load()
			return fmt.Sprintf("%s: %d uids in a state, %d changes, last %s", root, len(s.States), s.Changes,
				s.Last.Format("15:04:05.000"))
		}
		return &runner{run: run, close: w.Close, status: status, detail: func() any { return now.Load() }}, nil
	})
}

// appStateStatus is the component's status document.
type appStateStatus struct {
	States  map[uint32]string `json:"states"` // by uid
	Changes int               `json:"changes"`
	Last    time.Time         `json:"last"`
	Stages  *appStateStages   `json:"stages,omitempty"` // the last change's
}

// appStateStages is what one change took, stage by stage, from the
// watcher's wake-up (a wall clock time, to set beside the write's).
type appStateStages struct {
	Woke   time.Time     `json:"woke"`
	Read   time.Duration `json:"read_ns"`  // the groups' members and their uids
	Lock   time.Duration `json:"lock_ns"`  // waiting for the kernel state
	Maps   time.Duration `json:"maps_ns"`  // the desired state and the uid map's entries
	Follow followTimes   `json:"follow"`   // the open sockets: listing, moves
	Total  time.Duration `json:"total_ns"` // wake-up to done
}

// readAppStates reads the states and applies them if they changed; it
// returns them by name and, after a change, what each stage took.
func (d *Daemon) readAppStates(r appstate.Reader) (map[uint32]string, *appStateStages, error) {
	t0 := time.Now()
	st, err := r.States()
	if err != nil {
		return nil, nil, err
	}
	names := map[uint32]string{}
	for uid, s := range st {
		names[uid] = s.String()
	}
	t1 := time.Now()
	d.kernel.mu.Lock()
	defer d.kernel.mu.Unlock()
	if maps.Equal(st, d.kernel.appStates) || d.kernel.host == nil {
		return names, nil, nil
	}
	t2 := time.Now()
	d.kernel.appStates = st
	d.kernel.followed = followTimes{}
	if err := d.kernel.applyLocked(d.kernel.desiredFor(d.kernel.pol), false); err != nil {
		d.kernel.logApplyError(err)
	}
	f := d.kernel.followed
	total := time.Since(t0)
	return names, &appStateStages{Read: t1.Sub(t0), Lock: t2.Sub(t1), Follow: f,
		Maps: total - t2.Sub(t0) - f.List - f.Set, Total: total}, nil
}
