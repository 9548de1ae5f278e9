// regbounds_test.go: registrations that override or exhaust others', by an
// unprivileged user (N12) and by members of the access group (N11).
package daemon_test

import (
	"testing"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// TestMoreSpecificOverrideRefused (audit N12): root registered nobody's socket
// realtime without src; nobody registered the same flow background and was
// accepted: the daemon filled in src, so nobody's entry was the more specific
// one and the socket went realtime -> background. Fix: an unprivileged
// registration is refused when another uid's registration (or a policy flow
// rule) covers its key, and a privileged registration supersedes the more
// specific unprivileged ones it covers.
func TestMoreSpecificOverrideRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newAttackBed(t, "")
	user := b.client(t, nobody, nil)
	laneOf := func(cookie uint64) lane.Lane {
		m, err := b.root.SocketLanes([]uint64{cookie})
		if err != nil {
			t.Fatal(err)
		}
		return m[cookie]
	}
	conn := b.dialAs(t, nobody, "tcp", "", 0)
	f, err := client.FlowOf(conn)
	if err != nil {
		t.Fatal(err)
	}
	f.Src = ""
	if err := b.root.Register(f, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	if err := user.Register(f, lane.Background); err == nil {
		t.Error("nobody overrode root's registration of its socket: the src the daemon filled in made its entry the more specific")
	}
	if l := laneOf(cookieOf(t, conn)); l != lane.Realtime {
		t.Errorf("the socket root registered realtime is in %s", l)
	}
	// the other order: nobody first, root then registers the flow
	// without src; nobody's more specific entry must not win
	conn2 := b.dialAs(t, nobody, "tcp", "", 0)
	f2, _ := client.FlowOf(conn2)
	f2.Src = ""
	if err := user.Register(f2, lane.Background); err != nil {
		t.Fatal(err)
	}
	if err := b.root.Register(f2, lane.Interactive); err != nil {
		t.Fatal(err)
	}
	flows, err := b.root.Flows()
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range flows {
		if g := fi.Flow; g.DPort == f2.DPort && g.SPort == f2.SPort && fi.UID != 0 {
			t.Errorf("nobody's registration %s (%s) left beside root's of the same flow", g, fi.Lane)
		}
	}
	if l := laneOf(cookieOf(t, conn2)); l != lane.Interactive {
		t.Errorf("the socket root registered interactive after nobody is in %s", l)
	}
}

// TestMemberRegistrationsBounded (audit N11): a member of the access group
// registered flows with no socket in a loop: 5,557 accepted in 100 s, none
// refused, each living 10 minutes, the daemon at 103 % of a CPU. Fix: the
// bounds (maxRegsPerUID 256 per uid, maxUserRegs 3,584 for all uids but root)
// hold for every uid but root; root keeps 512 of the API's 4,096.
func TestMemberRegistrationsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newAttackBed(t, "access:\n  group: users\n")
	const perUID, users, rootKeeps = 256, 3584, 512
	sport := uint16(10000)
	register := func(c *client.Client, n int) (ok int) {
		for range n {
			sport++
			if c.Register(api.Flow{Dst: b.p.AddrB.String(), DPort: 9, SPort: sport, Proto: "udp"}, lane.Interactive) == nil {
				ok++
			}
		}
		return ok
	}
	first := b.client(t, 61000, []uint32{100})
	if ok := register(first, perUID+44); ok != perUID {
		t.Fatalf("a member registered %d of %d flows with no socket, want the bound %d", ok, perUID+44, perUID)
	}
	total := perUID
	for i := 1; total < users; i++ {
		m := b.client(t, uint32(61000+i), []uint32{100})
		total += register(m, min(perUID, users-total))
	}
	last := b.client(t, 61100, []uint32{100})
	if ok := register(last, 10); ok != 0 {
		t.Errorf("a member registered %d flows past the bound of all uids but root (%d)", ok, users)
	}
	if ok := register(b.root, rootKeeps); ok != rootKeeps {
		t.Errorf("root registered %d of its %d after the members' flood", ok, rootKeeps)
	}
	if flows, err := b.root.Flows(); err != nil || len(flows) != users+rootKeeps {
		t.Errorf("registrations: %d (%v), want %d", len(flows), err, users+rootKeeps)
	}
}
