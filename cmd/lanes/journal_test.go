package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
)

// Each line leads with its level's syslog priority; attributes and groups
// reach every level.
func TestJournalHandler(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(newJournalHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", "c1")
	log.Error("e")
	log.Warn("w")
	log.Info("i")
	log.Debug("d")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"<3>", "<4>", "<6>", "<7>"}
	if len(lines) != len(want) {
		t.Fatalf("lines: %q", lines)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]+"time=") || !strings.Contains(l, "instance=c1") {
			t.Errorf("line %d: %q, want %s first and the attribute", i, l, want[i])
		}
	}
}

// The journal is stderr only when $JOURNAL_STREAM names it.
func TestToJournal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", "")
	if toJournal(f) {
		t.Error("no JOURNAL_STREAM: want false")
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	if !toJournal(f) || toJournal(&bytes.Buffer{}) {
		t.Error("JOURNAL_STREAM naming the file: want true for it only")
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1))
	if toJournal(f) {
		t.Error("another inode: want false")
	}
}
