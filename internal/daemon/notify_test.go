// notify_test.go: sd_notify datagrams reach a socket like systemd's.
package daemon

import (
	"net"
	"path/filepath"
	"testing"
)

func TestSDNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := sdNotify("READY=1"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v", err)
	}
	for _, name := range []string{filepath.Join(t.TempDir(), "notify"), "@lanes-notify-test-" + filepath.Base(t.TempDir())} {
		addr := name
		if name[0] == '@' {
			addr = "\x00" + name[1:]
		}
		l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("NOTIFY_SOCKET", name)
		if err := sdNotify("READY=1\nSTATUS=running"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, err := l.Read(buf)
		l.Close()
		if err != nil || string(buf[:n]) != "READY=1\nSTATUS=running" {
			t.Errorf("%s: got %q, %v", name, buf[:n], err)
		}
	}
}
