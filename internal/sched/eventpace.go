// eventpace.go: what one user's process events cost the engine is bounded.
// A process at nice 19 looping prctl(PR_SET_NAME) kept the daemon at 81 %
// of a core (the engine's thread runs at nice -10 and read /proc for every
// rename) and overran the event source 1,308 times, each a full /proc
// rescan and a WARN line; an exec loop (1,065 a second) cost 20 %.
//
//   - exec and comm events of a uid other than root are considered at
//     uidEventRate a second (burst uidEventBurst); over it a process's
//     events wait, one entry per pid (a rename loop is one entry), and are
//     considered as the uid's budget allows (at most maxDeferred wait;
//     more are dropped and counted, and a rescan is due);
//   - an overrun (events lost) makes a rescan due; rescans run at most
//     once per rescanEvery, with one WARN line saying how many overruns
//     and drops it covers.
package sched

import (
	"strconv"
	"syscall"
	"time"
)

// Bounds of the event pacing.
const (
	uidEventRate  = 50
	uidEventBurst = 100
	maxDeferred   = 4096
	maxPacedUIDs  = 1024
	rescanEvery   = 30 * time.Second
	drainEvery    = 100 * time.Millisecond
)

// eventPacer is the engine's event budget (used by the watcher thread alone).
type eventPacer struct {
	byUID     map[uint32]*eventBucket
	deferred  map[int]Event // by pid: the latest event over its uid's rate
	lastDrain time.Time
	// rescan: a rescan is due (events lost or dropped); lastScan, the
	// last one; overruns and dropped, what the next one covers
	rescan            bool
	lastScan          time.Time
	overruns, dropped int
}

type eventBucket struct {
	tokens float64
	at     time.Time
}

// take spends a token of uid's budget at now, if it has one.
func (p *eventPacer) take(uid uint32, now time.Time) bool {
	if p.byUID == nil {
		p.byUID = map[uint32]*eventBucket{}
	}
	b := p.byUID[uid]
	if b == nil {
		if len(p.byUID) >= maxPacedUIDs {
			p.byUID = map[uint32]*eventBucket{}
		}
		b = &eventBucket{tokens: uidEventBurst, at: now}
		p.byUID[uid] = b
	}
	b.tokens = min(uidEventBurst, b.tokens+now.Sub(b.at).Seconds()*uidEventRate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// admit says whether ev is considered now; if not, it waits (or is dropped).
func (p *eventPacer) admit(ev Event, now time.Time) bool {
	uid, ok := procOwner(ev.TGID)
	if !ok || uid == 0 {
		return true
	}
	if _, waiting := p.deferred[ev.TGID]; !waiting && p.take(uid, now) {
		return true
	}
	if p.deferred == nil {
		p.deferred = map[int]Event{}
	}
	if _, waiting := p.deferred[ev.TGID]; !waiting && len(p.deferred) >= maxDeferred {
		p.dropped++
		p.rescan = true
		return false
	}
	p.deferred[ev.TGID] = ev
	return false
}

// due returns the waiting events whose uid's budget now allows them (at
// most once per drainEvery).
func (p *eventPacer) due(now time.Time) []Event {
	if len(p.deferred) == 0 || now.Sub(p.lastDrain) < drainEvery {
		return nil
	}
	p.lastDrain = now
	var out []Event
	for pid, ev := range p.deferred {
		uid, ok := procOwner(pid)
		if !ok { // gone
			delete(p.deferred, pid)
			continue
		}
		if uid == 0 || p.take(uid, now) {
			delete(p.deferred, pid)
			out = append(out, ev)
		}
	}
	return out
}

// forget drops a process's waiting event (it exited).
func (p *eventPacer) forget(pid int) { delete(p.deferred, pid) }

// rescanNow says whether a due rescan runs at now, and what it covers.
func (p *eventPacer) rescanNow(now time.Time) (run bool, overruns, dropped int) {
	if !p.rescan || (!p.lastScan.IsZero() && now.Sub(p.lastScan) < rescanEvery) {
		return false, 0, 0
	}
	overruns, dropped = p.overruns, p.dropped
	p.rescan, p.lastScan, p.overruns, p.dropped = false, now, 0, 0
	return true, overruns, dropped
}

// procOwner is the uid owning process pid (its /proc directory's owner).
func procOwner(pid int) (uint32, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return 0, false
	}
	return st.Uid, true
}
