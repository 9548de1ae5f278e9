// kick_test.go: the releaser's kick on cancellation (kickOnDone) has
// finished when the releaser returns, so Close never closes the eventfd
// under it.
package rtlane

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestKickOnDoneWaitsForAStartedKick(t *testing.T) {
	var finished atomic.Bool
	started := make(chan struct{})
	kick := func() {
		close(started)
		time.Sleep(20 * time.Millisecond) // a kick still writing
		finished.Store(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := kickOnDone(ctx, kick)
	cancel()
	<-started
	stop()
	if !finished.Load() {
		t.Fatal("stop returned while the kick it started was still running")
	}
}

func TestKickOnDoneNotAfterStop(t *testing.T) {
	var ran atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	stop := kickOnDone(ctx, func() { ran.Store(true) })
	stop()
	cancel()
	time.Sleep(10 * time.Millisecond)
	if ran.Load() {
		t.Fatal("kick ran after stop")
	}
}
