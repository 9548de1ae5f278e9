// supervise_test.go: a failed component is shown failed, then restarted.
package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSuperviseRestartsFailed(t *testing.T) {
	var starts, closes atomic.Int32
	release := make(chan struct{})
	proceed := make(chan struct{}) // the restart waits until the failure was seen
	start := func() (*runner, error) {
		n := starts.Add(1)
		if n == 2 {
			<-proceed
		}
		return &runner{
			run: func(ctx context.Context) error {
				if n == 1 {
					<-release
					return errors.New("accept: boom")
				}
				<-ctx.Done()
				return nil
			},
			close:  func() error { closes.Add(1); return nil },
			status: func() string { return "serving" },
			detail: func() any { return "doc" },
		}, nil
	}
	c, err := supervise(slog.New(slog.NewTextHandler(io.Discard, nil)), "x", start)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.status(); got != "serving" {
		t.Fatalf("status %q", got)
	}
	close(release)
	for i := 0; !strings.HasPrefix(c.status(), "FAILED: accept: boom"); i++ {
		if i == 6000 {
			t.Fatalf("never shown failed: %q", c.status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d, ok := c.detail().(map[string]any); !ok || d["failed"] != "accept: boom" {
		t.Errorf("detail while failed: %v", c.detail())
	}
	close(proceed)
	for i := 0; c.status() != "serving (restarted 1 times)"; i++ {
		if i == 6000 {
			t.Fatalf("status after restart %q", c.status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.stop()
	if closes.Load() != 2 {
		t.Errorf("closed %d times, want 2", closes.Load())
	}
}
