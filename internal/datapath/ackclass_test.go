// ackclass_test.go checks the ACK class on real TCP sockets: a capped
// download's pure ACKs go to 1:14 while the class is on, its data
// segments never, and nothing once its cap or the class is off; with the
// class on for every interactive socket, an uncapped download's too.
package datapath

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestAckClass(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	if err := sockops.HaveWindowClamp(); err != nil {
		t.Skipf("downlink caps need sock_ops TCP_WINDOW_CLAMP: %v", err)
	}
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "ack1"})
	if err := d.Caps.SetDownlinkCaps(true); err != nil {
		t.Fatal(err)
	}
	dl := newDownload(t, p, "9311")
	class := func() (pkts, bytes uint64) {
		t.Helper()
		st, err := d.egress.AckStats()
		if err != nil {
			t.Fatal(err)
		}
		return st.Packets, st.Bytes
	}
	counted := func() uint64 {
		t.Helper()
		n, err := d.Trees.AckClassBytes()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	send := func() { sendUntilWnd(t, dl.snd, 500*time.Millisecond, 0, func(uint32) bool { return false }) }
	// settled: the class's packets once the receiver's last ACKs (delayed
	// ACKs, window updates as its reader drains) have left, so that the
	// next step's count starts from them
	settled := func() (pkts, bytes uint64) {
		t.Helper()
		n, b := class()
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			m, c := class()
			if m == n {
				break
			}
			n, b = m, c
		}
		return n, b
	}

	// class on, the download not capped: its ACKs stay in their lane
	if err := d.Trees.SetAckClass(10_000_000); err != nil {
		t.Fatal(err)
	}
	send()
	if n, _ := class(); n != 0 || counted() != 0 {
		t.Fatalf("ACK class took %d packets (%d bytes counted) of an uncapped download", n, counted())
	}

	// capped: its pure ACKs go to the class
	if err := d.Caps.SetSocketRwndCap(dl.cookie, 64<<10); err != nil {
		t.Fatal(err)
	}
	send()
	n1, b1 := settled()
	if n1 == 0 || counted() == 0 {
		t.Fatalf("capped download: ACK class %d packets, %d bytes counted", n1, counted())
	}
	if b1/n1 > 100 {
		t.Errorf("ACK class: %d packets of %d bytes on average, not pure ACKs", n1, b1/n1)
	}
	t.Logf("ACK class: %d packets, %d bytes (classifier: %d bytes)", n1, b1, counted())

	// the receiver's own data segments stay in its lane
	dl.rcv.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := dl.rcv.Write(make([]byte, 32<<10)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, b := class(); b-b1 > 2000 {
		t.Errorf("the capped socket's 32 KB of data: the ACK class grew by %d bytes", b-b1)
	}

	// class off: the capped download's ACKs stay in their lane
	if err := d.Trees.SetAckClass(0); err != nil {
		t.Fatal(err)
	}
	n2, _ := settled()
	send()
	if n, _ := class(); n != n2 {
		t.Errorf("class off: ACK class took %d more packets", n-n2)
	}
	// on again, cap removed: none either
	if err := d.Trees.SetAckClass(10_000_000); err != nil {
		t.Fatal(err)
	}
	if err := d.Caps.SetSocketRwndCap(dl.cookie, 0); err != nil {
		t.Fatal(err)
	}
	send()
	if n, _ := class(); n != n2 {
		t.Errorf("cap removed: ACK class took %d more packets", n-n2)
	}

	// every interactive socket: the uncapped download's ACKs go to the
	// class, and what it sent is counted
	s0, err := d.Trees.AckClassSent()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Trees.SetAckClassEvery(10_000_000); err != nil {
		t.Fatal(err)
	}
	send()
	n3, _ := settled()
	s1, err := d.Trees.AckClassSent()
	if err != nil {
		t.Fatal(err)
	}
	if n3 == n2 || s1 <= s0 {
		t.Errorf("every socket: ACK class took %d packets, sent %d bytes, want the uncapped download's ACKs", n3-n2, s1-s0)
	}
	if err := d.Trees.SetAckClassEvery(0); err != nil {
		t.Fatal(err)
	}
	send()
	if n, _ := class(); n != n3 {
		t.Errorf("every socket, class off: ACK class took %d more packets", n-n3)
	}
}
