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
// every ccPollEvery; close ends it.
type ccFollower struct {
	watch *ccsysctl.Watch // nil: polling
	stop  chan struct{}
}

// startCCFollower starts h's allow-list follower (ccFollower owns it)
// once the host's programs exist; nothing without background_cc_keep (no list is checked).
func startCCFollower(h *Host) {
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

// ccSettle is when the list is read again after the last record: the hook
// runs before the sysctl's handler stores the write, so the reading at
// the record itself may find the list before it (a writer preempted
// between the two).
var ccSettle = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second}

// run reads the list again at each record and ccSettle after the last
// one (or every ccPollEvery) until stopped.
func (f *ccFollower) run(p *CgroupPrograms) {
	read := func() {
		if err := p.SyncCCAllowList(); err != nil && !errors.Is(err, errClosed) {
			slog.Warn("datapath: congestion control allow-list: the one read before stays", "err", err)
		}
	}
	if f.watch == nil {
		f.poll(read)
		return
	}
	records := make(chan struct{}, 1)
	go func() {
		for f.watch.Wait() == nil {
			select {
			case records <- struct{}{}:
			default: // a reading is pending already
			}
		}
		close(records)
	}()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	step := len(ccSettle)
	for {
		select {
		case _, ok := <-records:
			if !ok {
				return
			}
			read()
			step = 0
			settle.Reset(ccSettle[0])
		case <-settle.C:
			read()
			if step++; step < len(ccSettle) {
				settle.Reset(ccSettle[step] - ccSettle[step-1])
			}
		}
	}
}

// poll reads the list every ccPollEvery until stopped.
func (f *ccFollower) poll(read func()) {
	t := time.NewTicker(ccPollEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			read()
		case <-f.stop:
			return
		}
	}
}

// close ends run: its Wait returns an error or its ticker stops (run may
// be in a SyncCCAllowList, which returns errClosed once the host is
// closed).
func (f *ccFollower) close() error {
	close(f.stop)
	if f.watch != nil {
		return f.watch.Close()
	}
	return nil
}
