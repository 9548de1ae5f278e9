// pace.go: the requests of clients who are not granted, paced per uid in
// the daemon as lanes-rtd paces granted ones (rtd/pace.c): client_requests
// per second with a burst of paceBurst, kept as the time each uid's bucket
// is empty at (GCRA). Their answers (a refusal, or STATS from counters at
// most statsCacheAge old) are cheap, but without a bound one local user
// keeps the daemon busy answering them.
package rtlane

import (
	"sync"
	"time"
)

// paceBurst is how many requests a uid may send at once, as lanes-rtd's
// burst.
const paceBurst = 64

// uidPacer is a token bucket per uid.
type uidPacer struct {
	mu    sync.Mutex
	every time.Duration        // between two requests at the rate; 0: not paced
	tat   map[uint32]time.Time // when each uid's bucket is full again
}

func newUIDPacer(perSecond int) *uidPacer {
	p := &uidPacer{tat: map[uint32]time.Time{}}
	if perSecond > 0 {
		p.every = time.Second / time.Duration(perSecond)
	}
	return p
}

// delay charges one request of uid at now and returns how long it must
// wait first (0: at once).
func (p *uidPacer) delay(uid uint32, now time.Time) time.Duration {
	if p.every == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tat, ok := p.tat[uid]
	if !ok || tat.Before(now) {
		tat = now
	}
	p.tat[uid] = tat.Add(p.every)
	if len(p.tat) > 4096 {
		p.prune(now)
	}
	return max(0, tat.Sub(now)-(paceBurst-1)*p.every)
}

// prune forgets the uids whose buckets are full (they owe nothing), so
// that the map holds only uids that sent within the last burst.
func (p *uidPacer) prune(now time.Time) {
	for uid, tat := range p.tat {
		if !tat.After(now) {
			delete(p.tat, uid)
		}
	}
}
