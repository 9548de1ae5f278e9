// notify.go: systemd readiness (sd_notify). With Type=notify, systemd starts
// units that depend on lanes only once the daemon has installed its
// datapath and serves its API. The protocol is one datagram of
// "KEY=VALUE" lines to the unix socket in $NOTIFY_SOCKET (a path, or an
// abstract name starting with '@'); without that variable it does nothing.
package daemon

import (
	"net"
	"os"
)

// sdNotify sends state (e.g. "READY=1") to systemd's notification socket.
func sdNotify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
