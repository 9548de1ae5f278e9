// diagowners_test.go: a flow's owners and local address come from
// sock_diag asked for its local port, not from /proc/net's tables.
package daemon

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
)

// TestDiagOwnersOfAFlow: an unprivileged register read /proc/net/udp
// twice per request (owners, local address). The kernel's sockets on the
// flow's local port answer both: an unconnected socket there that can send
// as the flow is an owner too, and sockets on other ports (a kernel that
// ignores the filter lists them) are not.
func TestDiagOwnersOfAFlow(t *testing.T) {
	local := netip.MustParseAddrPort("10.0.0.1:5000")
	peer := netip.MustParseAddrPort("10.0.0.2:6000")
	listed := []openSock{
		{inode: 10, proto: unix.IPPROTO_UDP, uid: 1000, src: local, dst: peer},
		{inode: 20, proto: unix.IPPROTO_UDP, uid: 0, src: netip.AddrPortFrom(netip.IPv4Unspecified(), 5000),
			dst: netip.AddrPortFrom(netip.IPv4Unspecified(), 0)},
		{inode: 30, proto: unix.IPPROTO_UDP, uid: 2000, src: netip.MustParseAddrPort("10.0.0.1:5001"), dst: peer},
	}
	asked := 0
	o := diagOwners{procOwners{proc: t.TempDir()}, func(proto uint8, port uint16) ([]openSock, error) {
		asked++
		return listed, nil
	}}
	f := api.Flow{Proto: "udp", SPort: 5000, Dst: "10.0.0.2", DPort: 6000}
	uids, err := o.FlowOwners(f)
	if err != nil || len(uids) != 2 || uids[0] != 1000 || uids[1] != 0 {
		t.Fatalf("owners %v (%v), want [1000 0]: the unconnected root socket on the port sends as the flow too", uids, err)
	}
	addrs, err := o.localAddrs(f)
	if err != nil || len(addrs) != 1 || addrs[0] != local.Addr() || asked != 2 {
		t.Fatalf("local addresses %v (%v) after %d look-ups, want [%s] after 2", addrs, err, asked, local.Addr())
	}
	if _, err := o.FlowOwners(api.Flow{Proto: "udp", SPort: 5002, Dst: "10.0.0.2", DPort: 6000}); err == nil {
		t.Fatal("a flow with no socket has owners")
	}
}

// TestDiagOwnersFromTheKernel: the port-filtered sock_diag look-up finds a
// connected loopback UDP socket and root as its owner.
func TestDiagOwnersFromTheKernel(t *testing.T) {
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := net.DialUDP("udp4", nil, peer.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := c.LocalAddr().(*net.UDPAddr).AddrPort()
	f := api.Flow{Proto: "udp", SPort: src.Port(), Dst: "127.0.0.1", DPort: uint16(peer.LocalAddr().(*net.UDPAddr).Port)}
	o := diagOwners{procOwners: procOwners{proc: "/proc"}}
	if _, err := dumpPortSockets(unix.IPPROTO_UDP, f.SPort); err != nil {
		t.Skipf("no UDP sock_diag here: %v", err)
	}
	uids, err := o.FlowOwners(f)
	if err != nil || len(uids) != 1 || uids[0] != uint32(unix.Geteuid()) {
		t.Fatalf("owners of %s: %v (%v), want [%d]", f, uids, err, unix.Geteuid())
	}
	addrs, err := o.localAddrs(f)
	if err != nil || len(addrs) != 1 || addrs[0].Unmap() != src.Addr().Unmap() {
		t.Fatalf("local addresses of %s: %v (%v), want [%s]", f, addrs, err, src.Addr())
	}
}
