// journal.go: the daemon's log lines carry their syslog priority when its
// stderr is the journal (a systemd service's default): journald reads a
// leading "<N>" off the line (SyslogLevelPrefix=, on by default), so
// `journalctl -u lanes -p warning` shows the daemon's warnings and errors.
// Without the prefix every line was logged at priority info.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
)

// toJournal says whether w is the journal stream systemd connected
// ($JOURNAL_STREAM names its device and inode).
func toJournal(w io.Writer) bool {
	f, ok := w.(*os.File)
	js := os.Getenv("JOURNAL_STREAM")
	if !ok || js == "" {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return js == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// journalHandler writes text records, each line led by its priority:
// error <3>, warning <4>, info <6>, debug <7>.
type journalHandler struct{ hs [4]slog.Handler }

func newJournalHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	var j journalHandler
	for i, p := range []string{"<3>", "<4>", "<6>", "<7>"} {
		j.hs[i] = slog.NewTextHandler(prefixed{w, p}, opts)
	}
	return j
}

func (j journalHandler) pick(l slog.Level) slog.Handler {
	switch {
	case l >= slog.LevelError:
		return j.hs[0]
	case l >= slog.LevelWarn:
		return j.hs[1]
	case l >= slog.LevelInfo:
		return j.hs[2]
	}
	return j.hs[3]
}

func (j journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return j.pick(l).Enabled(ctx, l)
}

func (j journalHandler) Handle(ctx context.Context, r slog.Record) error {
	return j.pick(r.Level).Handle(ctx, r)
}

func (j journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var n journalHandler
	for i, h := range j.hs {
		n.hs[i] = h.WithAttrs(as)
	}
	return n
}

func (j journalHandler) WithGroup(name string) slog.Handler {
	var n journalHandler
	for i, h := range j.hs {
		n.hs[i] = h.WithGroup(name)
	}
	return n
}

// prefixed writes each record (one Write) led by its prefix, in one write.
type prefixed struct {
	w io.Writer
	p string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := p.w.Write(append([]byte(p.p), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}
