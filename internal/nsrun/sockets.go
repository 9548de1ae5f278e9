// sockets.go: close a namespace's TCP sockets before it is deleted.

package nsrun

import (
	"fmt"
	"os/exec"
)

// DestroyTCP destroys every TCP socket of the named namespace (sock_diag
// SOCK_DESTROY, through iproute2's `ss -K`). Deleting a namespace does not
// end its TCP connections: a socket whose process is gone stays an orphan,
// retransmitting to a peer that no longer exists for minutes, and keeps the
// namespace and what its sockets use alive meanwhile (a lanes congestion
// control stays registered). Tests and the lab call it before deleting a
// namespace they made, so nothing of a run outlives it.
func DestroyTCP(name string) error {
	out, err := exec.Command("ip", "netns", "exec", name, "ss", "-K", "-t", "-a", "-n").CombinedOutput()
	if err != nil {
		return fmt.Errorf("destroy TCP sockets in %s: %v: %s", name, err, out)
	}
	return nil
}
