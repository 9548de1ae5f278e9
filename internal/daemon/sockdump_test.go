// sockdump_test.go: users' moves list the namespace's sockets again only
// for a socket the last listing lacks (N15).
package daemon

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSockDumpListsAgainOnlyForMissing (audit N15): each user's move of a
// process holding 19,000 sockets listed them all again once a second. The
// listing is kept by inode and taken again only for an inode it lacks, or
// a UDP socket it saw with no port, once it is over dumpReuse old.
func TestSockDumpListsAgainOnlyForMissing(t *testing.T) {
	port := func(p uint16) netip.AddrPort { return netip.AddrPortFrom(netip.IPv4Unspecified(), p) }
	listed := []openSock{
		{cookie: 1, inode: 10, proto: unix.IPPROTO_UDP, src: port(5000)},
		{cookie: 2, inode: 20, proto: unix.IPPROTO_TCP},
		{cookie: 3, inode: 30, proto: unix.IPPROTO_UDP}, // not bound yet
	}
	dumps := 0
	dump := func() ([]openSock, error) { dumps++; return listed, nil }
	var c sockDump
	find := func(inodes ...uint32) int {
		set := map[uint32]bool{}
		for _, i := range inodes {
			set[i] = true
		}
		got, err := c.find(set, dump)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	steps := []struct {
		what      string
		inodes    []uint32
		old       bool // the listing made over dumpReuse ago
		found     int
		wantDumps int
	}{
		{"first move", []uint32{10, 20}, false, 2, 1},
		{"the same sockets, listing old", []uint32{10, 20}, true, 2, 1},
		{"a socket not listed, listing fresh", []uint32{10, 40}, false, 1, 1},
		{"a socket not listed, listing old", []uint32{10, 40}, true, 1, 2},
		{"a UDP socket listed without a port, fresh", []uint32{30}, false, 1, 2},
		{"a UDP socket listed without a port, old", []uint32{30}, true, 1, 3},
	}
	for _, s := range steps {
		if s.old {
			c.at = time.Now().Add(-2 * dumpReuse)
		} else if !c.at.IsZero() {
			c.at = time.Now()
		}
		if n := find(s.inodes...); n != s.found || dumps != s.wantDumps {
			t.Errorf("%s: %d sockets found after %d listings, want %d after %d", s.what, n, dumps, s.found, s.wantDumps)
		}
	}
}
