// openhold_test.go checks that a foreground connection's opening that is
// never answered does not hold background for good (issue 62, N6): a
// socket opening a non-blocking connect() every 300 ms to an address
// that never answers (one with no neighbour on the link: its SYNs never
// leave) holds the interface's background for its first opening alone.
package datapath

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// TestOpeningNeverAnsweredHoldsOnce (N6): 12 openings 300 ms apart to one
// address that never answers hold the interface (lanes_fg_open) and the
// QUIC/UDP class's egress (BgClassHeld) in at most a third of the samples
// taken over them; before, each opening renewed the hold and background
// was held all along.
func TestOpeningNeverAnsweredHoldsOnce(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openTwoEgress(t, p.A, p.LinkA)
	silent := net.IPv4(p.AddrB[0], p.AddrB[1], p.AddrB[2], 99).To4()
	var fds []int
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	open := func() {
		p.A.Do(t, func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			sa := &unix.SockaddrInet4{Port: 9413}
			copy(sa.Addr[:], silent)
			if err := unix.Connect(fd, sa); err != unix.EINPROGRESS {
				return err
			}
			return nil
		})
	}
	held, classHeld, samples := 0, 0, 0
	for range 12 {
		open()
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			states, now, err := h.Yield.ForegroundStates()
			if err != nil {
				t.Fatal(err)
			}
			samples++
			if st := states[idx[p.LinkA]]; st.Opening(now) {
				held++
			}
			if h.Background.BgClassHeld(idx[p.LinkA], Upload) { // the QUIC/UDP class's egress stopped
				classHeld++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("background held by the openings in %d of %d samples, the QUIC/UDP class in %d",
		held, samples, classHeld)
	if samples == 0 || held*3 > samples || classHeld*3 > samples {
		t.Errorf("openings never answered, 300 ms apart, held background in %d of %d samples "+
			"(the QUIC/UDP class in %d), want at most a third (one opening's hold)", held, samples, classHeld)
	}
}

// TestOpeningAnsweredHoldsOncePerSecond: an answered opening still holds
// (sock_ops writes the hold's end), a second one to the same address
// within a second does not, and one a second later does again.
func TestOpeningAnsweredHoldsOncePerSecond(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openTwoEgress(t, p.A, p.LinkA)
	_, addr := startSink(t, p.B, p.AddrB, 9414)
	openEnd := func() uint64 {
		t.Helper()
		states, _, err := h.Yield.ForegroundStates()
		if err != nil {
			t.Fatal(err)
		}
		return states[idx[p.LinkA]].OpenEnd
	}
	held := func(what string, want bool) {
		t.Helper()
		before := openEnd()
		dialCC(t, p.A, addr, "cubic")
		if got := openEnd() != before; got != want {
			t.Errorf("%s: held %v, want %v", what, got, want)
		}
	}
	first := time.Now()
	held("a first answered opening", true)
	// the first hold is let run out (a few RTTs after its handshake) before
	// the second opening: the second's handshake would otherwise shorten
	// or lengthen it (fg_opened at its end), which reads as a hold here
	// where the RTT is long (a TCG VM, a loaded machine)
	for end := openEnd(); monotonicNS() < end && time.Since(first) < 900*time.Millisecond; {
		time.Sleep(5 * time.Millisecond)
	}
	if time.Since(first) < 900*time.Millisecond { // not on a machine too loaded to tell
		held("a second opening to the same address at once", false)
	}
	time.Sleep(1100 * time.Millisecond)
	held("an opening a second later", true)
}

// TestOpeningHoldsForItsFirstFlight: at its handshake's end an opening
// holds for 2 of its RTTs or its first flight's time at the interface's
// upload capacity, the longer: on a veth, whose RTT is microseconds, the
// hold ends at once where no capacity is known, and at 62.5 KB/s (0.5
// Mbit/s) it lasts a 10-segment window's 231 ms.
func TestOpeningHoldsForItsFirstFlight(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openTwoEgress(t, p.A, p.LinkA)
	_, addr := startSink(t, p.B, p.AddrB, 9415)
	left := func() time.Duration { // the hold's time left after a handshake
		t.Helper()
		dialCC(t, p.A, addr, "cubic")
		states, now, err := h.Yield.ForegroundStates()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(int64(states[idx[p.LinkA]].OpenEnd) - int64(now))
	}
	if d := left(); d > 50*time.Millisecond {
		t.Errorf("no upload capacity known: the opening holds %v after its handshake, want its 2 RTTs", d)
	}
	time.Sleep(1100 * time.Millisecond) // an opening holds once a second per peer
	if err := h.Background.RaiseUploadRate(idx[p.LinkA], 62_500); err != nil {
		t.Fatal(err)
	}
	if d := left(); d < 100*time.Millisecond || d > FgOpenHold {
		t.Errorf("at 62.5 KB/s the opening holds %v after its handshake, want its first flight's ~231 ms", d)
	}
}

// TestOpeningHoldEndsWithItsOwnHandshake: connections to one peer every
// 300 ms, where the upload capacity known is low (20 KB/s: a first
// flight's time over the 500 ms cap), hold background once a second for
// at most 500 ms each. The handshake of a connection whose connect did not
// hold (within the second) extended the running hold 500 ms at a time,
// and the holds chained: background held all along (84-96 % of the lab's
// churn step on the LTE traces).
func TestOpeningHoldEndsWithItsOwnHandshake(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openTwoEgress(t, p.A, p.LinkA)
	_, addr := startSink(t, p.B, p.AddrB, 9416)
	if err := h.Background.RaiseUploadRate(idx[p.LinkA], 20_000); err != nil {
		t.Fatal(err)
	}
	held, samples := 0, 0
	for range 12 {
		c := dialCC(t, p.A, addr, "cubic")
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			states, now, err := h.Yield.ForegroundStates()
			if err != nil {
				t.Fatal(err)
			}
			samples++
			if states[idx[p.LinkA]].Opening(now) {
				held++
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
	}
	t.Logf("connections every 300 ms held background in %d of %d samples", held, samples)
	if samples == 0 || held*10 > samples*6 {
		t.Errorf("connections every 300 ms to one peer held background in %d of %d samples, "+
			"want at most 500 ms a second (with the second's handshake: 60 %%)", held, samples)
	}
}
