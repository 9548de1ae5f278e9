// ccfollow.go: the congestion control allow-list that cgroup/setsockopt
// checks (appcc.go SyncCCAllowList) follows
// net.ipv4.tcp_allowed_congestion_control at each write of it: a
// cgroup/sysctl program at the cgroup v2 root posts a record per write
// (internal/bpf/ccsysctl) and the list is read again. Without that
// program (capability cc_allow_live off) the list is read again every
// ccPollEvery.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/ccsysctl"
)

// ccPollEvery is how often the allow-list is read again where no write
// is seen (capability cc_allow_live off).
const ccPollEvery = 5 * time.Second

// ccFollower reads the allow-list again at each write of the sysctl, or
// every ccPollEvery; stop ends it.
type ccFollower struct {
	watch *ccsysctl.Watch // nil: polling
	stop  chan struct{}
}

// followCCAllowList starts the follower once the host's programs exist;
// nothing without background_cc_keep (no list is checked).
func (h *Host) followCCAllowList() {
	if _, off := h.off[CapBgCCKeep]; off || h.optLink == nil {
		if _, already := h.off[CapCCAllowLive]; !already {
			h.off[CapCCAllowLive] = "needs " + string(CapBgCCKeep)
		}
		return
	}
	f := &ccFollower{stop: make(chan struct{})}
	if _, off := h.off[CapCCAllowLive]; !off {
		w, err := ccsysctl.Attach(h.cfg.CgroupRoot)
		if err != nil {
			h.disable(CapCCAllowLive, fmt.Errorf("%w; the allow-list is read every %s", err, ccPollEvery))
		}
		f.watch = w
	}
	h.ccFollow = f
	go f.run(h.Programs)
}

// run reads the list again at each record (or tick) until stopped.
func (f *ccFollower) run(p *CgroupPrograms) {
	next := f.tick()
	for next() {
		if err := p.SyncCCAllowList(); err != nil && !errors.Is(err, errClosed) {
			slog.Warn("datapath: congestion control allow-list: the one read before stays", "err", err)
		}
	}
}

// tick returns the wait for the next reading: false once stopped.
func (f *ccFollower) tick() func() bool {
	if f.watch != nil {
		return func() bool { return f.watch.Wait() == nil }
	}
	t := time.NewTicker(ccPollEvery)
	return func() bool {
		select {
		case <-t.C:
			return true
		case <-f.stop:
			t.Stop()
			return false
		}
	}
}

// close ends run: its Wait or tick returns false (run may be in a
// SyncCCAllowList, which returns errClosed once the host is closed).
func (f *ccFollower) close() error {
	close(f.stop)
	if f.watch != nil {
		return f.watch.Close()
	}
	return nil
}
