// logpace.go: a caller's log lines are bounded per uid (root's are not):
// a member's register/unregister loop wrote 132,000 lines (20 MB) in 15 s.
// Over the bound a caller's lines are counted, and its next line that
// passes says how many were left out ("suppressed").
package apiserver

import (
	"sync"
	"time"
)

// Log lines a second per uid, and at once.
const (
	logRate  = 10
	logBurst = 20
)

// logPacer holds each uid's bucket and the lines it left out.
type logPacer struct {
	mu    sync.Mutex
	byUID map[uint32]*logBucket
}

type logBucket struct {
	b          bucket
	suppressed int
}

// admit says whether uid's line at now is written, and how many of its
// lines were left out before it.
func (p *logPacer) admit(uid uint32, now time.Time) (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byUID == nil {
		p.byUID = map[uint32]*logBucket{}
	}
	lb := p.byUID[uid]
	if lb == nil {
		if len(p.byUID) >= maxPaced {
			p.byUID = map[uint32]*logBucket{} // a fresh start beats unbounded memory
		}
		lb = &logBucket{}
		p.byUID[uid] = lb
	}
	if lb.b.take(now, logRate, logBurst, 1) > 0 {
		lb.b.tokens++ // a line left out owes nothing
		lb.suppressed++
		return false, 0
	}
	n := lb.suppressed
	lb.suppressed = 0
	return true, n
}

// logFor writes an info line for uid's request, bounded unless uid is root.
func (s *Server) logFor(uid uint32, msg string, attrs ...any) {
	if uid != 0 {
		ok, left := s.logs.admit(uid, time.Now())
		if !ok {
			return
		}
		if left > 0 {
			attrs = append(attrs, "suppressed", left)
		}
	}
	s.log.Info(msg, attrs...)
}
