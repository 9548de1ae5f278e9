// lberemote_fgkinds_test.go: the bursty foreground kinds' generators
// (lberemote_fgkinds.go): their pace and burst shapes on a recording
// writer and on loopback, their sockets' congestion control, the page
// loads' sizes and times (no root).
package lbe

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// recorder records each write's time since start and size.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
	sizes []int
	total int
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, time.Since(r.start))
	r.sizes = append(r.sizes, len(p))
	r.total += len(p)
	return len(p), nil
}

// record runs pattern at rate into a recorder for d.
func record(pattern string, rate int, d time.Duration) *recorder {
	r := &recorder{start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = writePattern(ctx, r, pattern, rate)
	return r
}

func TestParseSteadyFGBursty(t *testing.T) {
	got, err := parseSteadyFG("apppaced,video,pageload,opposite")
	if err != nil || len(got) != 4 {
		t.Errorf("the bursty kinds: %v %v", got, err)
	}
}

// The application pacer writes the rate's bytes in many small bursts
// (one per millisecond tick), none as large as the total.
func TestWritePatternAppPaced(t *testing.T) {
	const rate = 200_000
	r := record(SteadyAppPaced, rate, time.Second)
	t.Logf("%d bytes in %d writes, largest %d (goal: %d bytes in ~1000 writes)", r.total, len(r.at), slices.Max(r.sizes), rate)
	if last := r.at[len(r.at)-1]; float64(r.total) > float64(rate)*last.Seconds()+1 {
		t.Errorf("%d bytes by %v at %d bytes/s: the pacer runs ahead of its clock", r.total, last, rate)
	}
	if len(r.at) < 100 || r.total < rate/2 || slices.Max(r.sizes) > rate/10 {
		testutil.TimingErrorf(t, "%d bytes in %d writes in 1 s, largest burst %d, at %d bytes/s", r.total, len(r.at), slices.Max(r.sizes), rate)
	}
}

// A video writes a whole segment at once, then nothing until the next
// segment is due: the bytes past the first segment are written no earlier
// than a segment's time after the start.
func TestWritePatternVideo(t *testing.T) {
	const rate = 100_000
	seg := int(rate * videoSegment.Seconds())
	r := record(SteadyVideo, rate, videoSegment+videoSegment/4)
	done := 0
	for i, at := range r.at {
		if done >= seg && at < videoSegment {
			t.Errorf("%d bytes past the first segment at %v, before the next is due", r.sizes[i], at)
		}
		done += r.sizes[i]
	}
	t.Logf("%d bytes in %d writes over 2.5 s (goal: two segments, %d)", r.total, len(r.at), 2*seg)
	if r.total > 2*seg {
		t.Errorf("%d bytes over 2.5 s: want at most two segments of %d", r.total, seg)
	}
	if r.total != 2*seg {
		testutil.TimingErrorf(t, "%d bytes over 2.5 s, want two segments (%d)", r.total, 2*seg)
	}
}

// Over loopback, the server paces an application-paced download at the
// asked rate.
func TestPatternDownloadLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = servePatterns(ctx, ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const rate = 300_000
	if _, err := fmt.Fprintf(c, `{"pattern":%q,"rate":%d,"down":true}`+"\n", SteadyAppPaced, rate); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	got, _ := io.Copy(io.Discard, c)
	t.Logf("received %d bytes in 1 s at %d bytes/s", got, rate)
	if got > rate*3/2+64<<10 {
		t.Errorf("received %d bytes in 1 s at %d bytes/s: not paced", got, rate)
	}
	if got < rate/2 {
		testutil.TimingErrorf(t, "received %d bytes in 1 s at %d bytes/s", got, rate)
	}
}

func TestPageSizes(t *testing.T) {
	a, b := pageSizes(rand.New(rand.NewSource(7))), pageSizes(rand.New(rand.NewSource(7)))
	if !slices.Equal(a, b) || len(a) != pageConns {
		t.Fatalf("the same seed, pages %v and %v", a, b)
	}
	for _, s := range a {
		if s < pageMinKB*1000 || s > pageMaxKB*1000 {
			t.Errorf("object of %d bytes, outside %d-%d KB", s, pageMinKB, pageMaxKB)
		}
	}
}

// A page completes when its last object has; an object cut short fails
// the page.
func TestLoadPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		if n == 666 {
			w.Header().Set("Content-Length", "1000")
		}
		_, _ = w.Write(make([]byte, n))
	}))
	defer srv.Close()
	if s := loadPage(srv.Client(), srv.URL, pageSizes(rand.New(rand.NewSource(1)))); s <= 0 {
		t.Errorf("page: %v s", s)
	}
	if s := loadPage(srv.Client(), srv.URL, []int{1000, 666}); s != -1 {
		t.Errorf("page with a short object: %v s, want -1", s)
	}
}

func TestCollectPages(t *testing.T) {
	lines := make(chan string, 4)
	for _, l := range []string{"page 1 0.5", "ready", "page 0 0.25", "page 3 1"} {
		lines <- l
	}
	close(lines)
	if got := collectPages(lines); !slices.Equal(got, []float64{0.25, 0.5}) {
		t.Errorf("pages %v, want [0.25 0.5] (page 2 not finished)", got)
	}
	if r := pageOfAlone([]float64{2, 4, 9}, []float64{1, 2}); r != 2 {
		t.Errorf("pages ÷ alone %v, want 2", r)
	}
	if r := pageOfAlone([]float64{2, -1}, []float64{1, 2}); r != 0 {
		t.Errorf("a failed page: %v, want 0", r)
	}
}

// A slow fixed link's buffer is the --queue asked for, not a floor of
// tens of KB (seconds at 0.2 Mbit/s).
func TestSlowLinkBuffer(t *testing.T) {
	for _, rate := range []float64{0.2e6, 0.5e6, 1e6} {
		for _, q := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
			c := &RemoteConfig{FixedRate: rate, QueueTime: q, Delay: 20 * time.Millisecond}
			up, _, err := c.remoteLinks("fixed")
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(float64(up.QueueBytes) * 8 / rate * float64(time.Second)); got > q+200*time.Millisecond {
				t.Errorf("%.1f Mbit/s, --queue %v: a buffer of %d bytes, %v", rate/1e6, q, up.QueueBytes, got)
			}
			if c.answerWait() < 2*(q+c.Delay) {
				t.Errorf("--queue %v: the probe waits %v for its late answers", q, c.answerWait())
			}
		}
	}
}

// The bursty kinds' sockets, both ends, run the lab's congestion control,
// not the namespace's default.
func TestPatternSocketsRunTheLabCC(t *testing.T) {
	def, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skip(err)
	}
	want := "reno"
	if strings.TrimSpace(string(def)) == want {
		want = "cubic"
	}
	t.Setenv("LANES_LAB_CC", want)
	ln, err := patternListener.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := patternDialer.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Skipf("%s cannot be set here: %v", want, err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for end, conn := range map[string]net.Conn{"client": c, "server": s} {
		raw, err := conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var got string
		var gerr error
		if err := raw.Control(func(fd uintptr) {
			got, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
		}); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		if strings.TrimRight(got, "\x00") != want {
			t.Errorf("the %s's socket runs %q, want the lab's %q", end, got, want)
		}
	}
}
