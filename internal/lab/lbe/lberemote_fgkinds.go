// lberemote_fgkinds.go: the steady step's bursty foreground kinds
// (--steady-fg), the foregrounds phones and laptops run:
//
//   - apppaced: a TCP stream paced by the application at the steady
//     rate: every millisecond it writes what its clock allows, as
//     `iperf3 -b` does (bursts into the socket, no SO_MAX_PACING_RATE);
//   - video: an on/off download (or upload) of 2 s segments at the steady
//     rate, each segment's bytes written as fast as the path takes them,
//     then idle until the next segment is due;
//   - pageload: every few seconds a page of a dozen short connections,
//     each a GET of 20-200 KB (the sizes drawn from --seed, the same for
//     every method); its completion times are paired with the same
//     foreground's without background;
//   - opposite: an unpaced bulk flow in the other direction from the
//     background (a download beside a background upload and the reverse).
//
// apppaced and video run between the helpers fg-pattern (the phone) and
// fg-pattern-serve (fgsrv) on their own TCP port; the writer paces in
// whichever end sends.
package lbe

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// The bursty foreground kinds.
const (
	SteadyAppPaced = "apppaced" // TCP paced by the application, 1 ms bursts
	SteadyVideo    = "video"    // on/off 2 s segments
	SteadyPageLoad = "pageload" // a dozen short connections every few seconds
	SteadyOpposite = "opposite" // bulk in the other direction
)

// steadyKindsAll are the kinds --steady-fg takes.
var steadyKindsAll = []string{SteadyTCP, SteadyUDP, SteadyAppPaced, SteadyVideo, SteadyPageLoad, SteadyOpposite}

const (
	// appTick is the application pacer's timer (iperf3 -b's 1 ms).
	appTick = time.Millisecond
	// videoSegment is a video segment's play time.
	videoSegment = 2 * time.Second
	// patternPort is fg-pattern-serve's TCP port on fgsrv.
	patternPort = "5001"
	// pageEvery, pageConns, pageMinKB and pageMaxKB shape a page load.
	pageEvery            = 3 * time.Second
	pageConns            = 12
	pageMinKB, pageMaxKB = 20, 200
)

func init() {
	testbed.RegisterHelper("fg-pattern", helperFGPattern)
	testbed.RegisterHelper("fg-pattern-serve", helperFGPatternServe)
	testbed.RegisterHelper("pageload", helperPageLoad)
}

// patternDialer and patternListener open the bursty kinds' TCP sockets
// with the lab's congestion control (--cc, LANES_LAB_CC), whatever the
// namespace defaults to: a machine whose tcp_allowed_congestion_control
// lacks it leaves its namespaces at its own default (BBR on some), and a
// BBR video holds a bandwidth-delay product of queue beside any other
// flow where CUBIC's is its own buffer's.
var (
	patternDialer   = &net.Dialer{Control: testbed.CCControl}
	patternListener = &net.ListenConfig{Control: testbed.CCControl}
)

// writePattern writes zeros to w in pattern (SteadyAppPaced or
// SteadyVideo) at rate bytes/s until ctx ends or w fails.
func writePattern(ctx context.Context, w io.Writer, pattern string, rate int) error {
	buf := make([]byte, 64<<10)
	send := func(n int) error {
		for n > 0 && ctx.Err() == nil {
			k := min(n, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	start := time.Now()
	if pattern == SteadyVideo {
		seg := int(float64(rate) * videoSegment.Seconds())
		for i := 0; ctx.Err() == nil; i++ {
			if err := send(seg); err != nil {
				return err
			}
			sleepUntil(ctx, start.Add(time.Duration(i+1)*videoSegment))
		}
		return nil
	}
	for sent := 0; ctx.Err() == nil; time.Sleep(appTick) {
		due := int(time.Since(start).Seconds() * float64(rate))
		if err := send(due - sent); err != nil {
			return err
		}
		sent = max(sent, due)
	}
	return nil
}

// sleepUntil sleeps until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// patternRequest is the line fg-pattern sends first: who writes, how.
type patternRequest struct {
	Pattern string `json:"pattern"`
	Rate    int    `json:"rate"`
	Down    bool   `json:"down"` // the server writes; else the client
}

// helperFGPattern connects to --to and runs --pattern at --rate in --dir
// until killed.
func helperFGPattern(args []string) error {
	fs := flag.NewFlagSet("fg-pattern", flag.ContinueOnError)
	to := fs.String("to", "", "fg-pattern-serve's IP:PORT")
	pattern := fs.String("pattern", SteadyAppPaced, "apppaced or video")
	rate := fs.Int("rate", 0, "bytes/s")
	dir := fs.String("dir", "upload", "upload (this end writes) or download")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := patternDialer.Dial("tcp", *to)
	if err != nil {
		return err
	}
	defer c.Close()
	return runPattern(context.Background(), c, patternRequest{*pattern, *rate, *dir == "download"})
}

// runPattern is the client's side of one pattern connection c.
func runPattern(ctx context.Context, c net.Conn, req patternRequest) error {
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return err
	}
	if req.Down {
		_, err := io.Copy(io.Discard, c)
		return err
	}
	return writePattern(ctx, c, req.Pattern, req.Rate)
}

// helperFGPatternServe accepts fg-pattern's connections on --listen.
func helperFGPatternServe(args []string) error {
	fs := flag.NewFlagSet("fg-pattern-serve", flag.ContinueOnError)
	listen := fs.String("listen", ":"+patternPort, "TCP listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := patternListener.Listen(context.Background(), "tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return servePatterns(context.Background(), ln)
}

// servePatterns serves each connection on ln until ln fails.
func servePatterns(ctx context.Context, ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			var req patternRequest
			line, err := r.ReadBytes('\n')
			if err != nil || json.Unmarshal(line, &req) != nil {
				return
			}
			if req.Down {
				_ = writePattern(ctx, c, req.Pattern, req.Rate)
				return
			}
			_, _ = io.Copy(io.Discard, r)
		}()
	}
}

// pageSizes are a page's object sizes, bytes, drawn from rng.
func pageSizes(rng *rand.Rand) []int {
	s := make([]int, pageConns)
	for i := range s {
		s[i] = (pageMinKB + rng.Intn(pageMaxKB-pageMinKB+1)) * 1000
	}
	return s
}

// helperPageLoad loads a page every --every from --url until killed and
// prints each page's completion time, seconds, one line per page in the
// order the pages started ("page N SECONDS"; -1: an object failed).
func helperPageLoad(args []string) error {
	fs := flag.NewFlagSet("pageload", flag.ContinueOnError)
	url := fs.String("url", "", "server URL (http://IP:PORT)")
	every := fs.Duration("every", pageEvery, "between pages")
	seed := fs.Int64("seed", 1, "seed of the objects' sizes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true, DialContext: patternDialer.DialContext}, Timeout: time.Minute}
	rng := rand.New(rand.NewSource(*seed))
	var mu sync.Mutex
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for i := 0; ; i++ {
		sizes := pageSizes(rng)
		go func() {
			secs := loadPage(cl, *url, sizes)
			mu.Lock()
			fmt.Printf("page %d %.4f\n", i, secs)
			mu.Unlock()
		}()
		<-tick.C
	}
}

// loadPage GETs every size at once from url, each on a connection of its
// own; the seconds until the last is done (-1 if one failed).
func loadPage(cl *http.Client, url string, sizes []int) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	failed := make(chan struct{}, len(sizes))
	for _, n := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := cl.Get(fmt.Sprintf("%s/data?bytes=%d", url, n))
			if err == nil {
				var got int64
				got, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && got != int64(n) {
					err = io.ErrUnexpectedEOF
				}
			}
			if err != nil {
				failed <- struct{}{}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		return -1
	}
	return time.Since(start).Seconds()
}

// parsePageLine reads "page N SECONDS" into N and the seconds.
func parsePageLine(l string) (int, float64, bool) {
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "page" {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(f[1])
	s, err2 := strconv.ParseFloat(f[2], 64)
	return n, s, err1 == nil && err2 == nil
}

// startBurstyFG starts a bursty kind's foreground in the background's
// direction dir (opposite: the other one) at rate bytes/s; stop ends it
// and, for pageload, puts the pages' times into s.
func (rb *remoteBed) startBurstyFG(ctx context.Context, kind, dir string, rate int, s *RemoteSteady) (stop func(), err error) {
	url := "http://" + rb.fg.Addr.String() + ":80"
	switch kind {
	case SteadyOpposite:
		other := "download"
		if dir == "download" {
			other = "upload"
		}
		p, err := rb.phone.Start(steadyArgs(other, rb.fg, 0)...)
		if err != nil {
			return nil, err
		}
		return func() { rb.endBulk(p) }, nil
	case SteadyPageLoad:
		p, err := rb.phone.Start("pageload", "--url", url, "--seed", strconv.FormatInt(rb.cfg.Seed, 10))
		if err != nil {
			return nil, err
		}
		return func() { rb.endBulk(p); s.PageS = collectPages(p.Lines) }, nil
	}
	srv, err := rb.fg.Start("fg-pattern-serve", "--listen", ":"+patternPort)
	if err != nil {
		return nil, err
	}
	if l, err := srv.Line(ctx, 15*time.Second); err != nil || l != "ready" {
		srv.Kill()
		return nil, fmt.Errorf("fg-pattern-serve in %s: %q %v", rb.fg.Name, l, err)
	}
	cl, err := rb.phone.Start(patternArgs(rb.fg, kind, dir, rate)...)
	if err != nil {
		srv.Kill()
		return nil, err
	}
	return func() { cl.Kill(); srv.Kill(); rb.endBulk(cl) }, nil
}

// patternArgs is the phone's fg-pattern helper for kind in dir.
func patternArgs(s *topo.Node, kind, dir string, rate int) []string {
	return []string{"fg-pattern", "--to", net.JoinHostPort(s.Addr.String(), patternPort),
		"--pattern", kind, "--rate", strconv.Itoa(rate), "--dir", dir}
}

// collectPages reads the page lines a killed pageload left: the pages'
// seconds in their start order, up to the first page not finished.
func collectPages(lines <-chan string) []float64 {
	got := map[int]float64{}
	for l := range lines {
		if n, s, ok := parsePageLine(l); ok {
			got[n] = s
		}
	}
	var out []float64
	for i := 0; ; i++ {
		s, ok := got[i]
		if !ok {
			return out
		}
		out = append(out, s)
	}
}

// pageOfAlone is the mean page time of s ÷ that of the paired run b, over
// the pages both finished (0 if none, or a page failed).
func pageOfAlone(s, b []float64) float64 {
	n := min(len(s), len(b))
	var sum, base float64
	for i := range n {
		if s[i] < 0 || b[i] < 0 {
			return 0
		}
		sum, base = sum+s[i], base+b[i]
	}
	if base <= 0 {
		return 0
	}
	return sum / base
}
