// soak_test.go: the churn soak. A daemon (shaped uplink on A's veth, coop
// controller capping local uploads and downloads) serves workers that, for
// the whole run, open TCP connections A -> B, register each through the
// API, send 16 KB and close, while `lanes run` starts short processes in
// the background lane, and long flows run beside them under coop caps:
// uploads and paced downloads of soakLongFor each (one of each registered
// background: LEDBAT++ and rLEDBAT), replaced as they end, so the cwnd caps
// (lanes_sock_cap, the cap congestion control) and the receive-window caps
// (lanes_sock_rwnd) are set, changed and dropped all along. Every interval
// the daemon's RSS, threads, open fds, registrations, the entry count of
// every BPF map it holds and the entries of the socket-cookie maps whose
// socket is no longer open are printed. It fails if RSS, threads or fds
// grow (the second half's peak against the first half's), if any
// socket-cookie map holds an entry for a closed socket at the end, or if
// a registration remains.
//
// Off by default (it is a benchmark, not a test of CI's budget):
//
//	make soak                 (1 h; SOAK=10m make soak for a shorter run)
//	LANES_SOAK=30m ./scripts/go test -count=1 -run TestSoakChurn -v ./internal/daemon/
//	LANES_SOAK=3m  ... (short run)
package daemon_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

// soakSample is one row of the soak's figures.
type soakSample struct {
	at                  time.Duration
	conns, runs         int64
	rssKB, threads, fds int
	regs                int
	longs               int64
	maps                map[string]int // name -> entries (-1: not countable)
	stale               map[string]int // socket-cookie maps: entries whose socket is not open
}

func TestSoakChurn(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("LANES_SOAK"))
	if err != nil {
		t.Skip("soak benchmark: set LANES_SOAK=30m (or a shorter duration)")
	}
	testutil.RequireRoot(t)
	s := newSoak(t)
	s.startLoad()
	samples := s.sampleFor(dur)
	final := samples[len(samples)-1]
	cols := countableMaps(samples)
	s.logSockops()
	t.Logf("churn soak %v on a loaded machine: %d connections registered (%d register errors), %d lanes run, %d long flows of %v", dur, final.conns, s.regErrs.Load(), final.runs, final.longs, soakLongFor)
	logSoakTable(t, samples, cols)
	logRange(t, samples, cols)
	checkSoakEnd(t, samples)
	checkFlat(t, samples[:len(samples)-1])
}

// soak is the churn soak's bed: the daemon on A, the sink and the paced
// source on B, and the load's counters.
type soak struct {
	t                           *testing.T
	p                           *testutil.Pair
	sock                        string
	pid                         int
	sink, src                   net.Listener
	conns, runs, regErrs, longs atomic.Int64
	stop                        chan struct{}
	wg                          sync.WaitGroup
}

// newSoak starts the daemon (shaped uplink, coop capping uploads and
// downloads, safety off) and B's sink and paced source.
func newSoak(t *testing.T) *soak {
	p := testutil.NewVethPair(t)
	pol := fmt.Sprintf(`interfaces:
  - name: %s
    mode: shaped
    uplink: 40mbit
coop:
  enabled: true
  port: 7311
  interval: 100ms
  state_file: %q
  headroom: 0
  ap_rate: 40mbit
  ap_downlink_rate: 40mbit
  downlink_caps: true
  safety:
    enabled: false
`, p.LinkA, t.TempDir()+"/coop.json")
	d, sock := startDaemon(t, p.A, pol)
	s := &soak{t: t, p: p, sock: sock, pid: d.cmd.Process.Pid, stop: make(chan struct{})}
	p.B.Do(t, func() (err error) { s.sink, err = net.Listen("tcp4", p.AddrB.String()+":0"); return err })
	t.Cleanup(func() { s.sink.Close() })
	go func() {
		for {
			c, err := s.sink.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	// the long downloads' source on B, paced so the veth needs little CPU
	p.B.Do(t, func() (err error) { s.src, err = net.Listen("tcp4", p.AddrB.String()+":0"); return err })
	t.Cleanup(func() { s.src.Close() })
	go serveSource(s.src, soakDownRate)
	return s
}

// startLoad starts the long flows, the registering workers and `lanes run`.
func (s *soak) startLoad() {
	for i := range soakLongFlows {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			long := longFlow{ns: s.p.A, api: s.sock, upload: i%2 == 0, background: i < 2}
			long.dst = s.sink.Addr().String()
			if !long.upload {
				long.dst = s.src.Addr().String()
			}
			long.run(s.t, s.stop, &s.longs)
		}()
	}
	const workers = 4
	for range workers {
		s.wg.Add(1)
		go s.churn()
	}
	s.wg.Add(1)
	go s.lanesRuns()
}

// churn is one worker: connections A -> B, each registered in the
// background lane through the API, 16 KB sent, closed.
func (s *soak) churn() {
	defer s.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread stays in A and dies with us
	if err := netns.Set(s.p.A.Handle); err != nil {
		s.t.Error(err)
		return
	}
	c, err := client.Dial(s.sock)
	if err != nil {
		s.t.Error(err)
		return
	}
	defer c.Close()
	buf := make([]byte, 16<<10)
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		conn, err := net.Dial("tcp4", s.sink.Addr().String())
		if err != nil {
			continue
		}
		if _, err := c.RegisterConn(conn, lane.Background); err != nil {
			s.regErrs.Add(1)
		}
		conn.Write(buf)
		conn.Close()
		s.conns.Add(1)
	}
}

// lanesRuns starts a short process in the background lane every 500 ms.
func (s *soak) lanesRuns() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		if err := s.p.A.Command(lanesBin, "run", "--socket", s.sock, "--lane", "background", "--", "true").Run(); err == nil {
			s.runs.Add(1)
		}
	}
}

// sample reads the daemon's figures now.
func (s *soak) sample(start time.Time) soakSample {
	r := soakSample{at: time.Since(start).Round(time.Second), conns: s.conns.Load(), runs: s.runs.Load(), longs: s.longs.Load()}
	r.rssKB, r.threads = procStatus(s.pid)
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid))
	r.fds = len(fds)
	r.maps, r.stale = mapEntries(s.pid, openCookies(s.t, s.p.A))
	if c, err := client.Dial(s.sock); err == nil {
		fl, _ := c.Flows()
		r.regs = len(fl)
		c.Close()
	}
	return r
}

// sampleFor samples about 30 times over dur, stops the load, and adds a
// final sample once the sweep (every 2 s) has had time to remove every
// registration of the closed sockets (bounded).
func (s *soak) sampleFor(dur time.Duration) []soakSample {
	start := time.Now()
	every := max(dur/30, 5*time.Second)
	samples := []soakSample{s.sample(start)}
	for time.Since(start) < dur {
		time.Sleep(every)
		samples = append(samples, s.sample(start))
	}
	close(s.stop)
	s.wg.Wait()
	for i := 0; i < 300 && s.sample(start).regs > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	return append(samples, s.sample(start))
}

// logSockops logs the daemon's sock_ops counters over the run.
func (s *soak) logSockops() {
	st, err := client.Dial(s.sock)
	if err != nil {
		return
	}
	defer st.Close()
	if r, err := st.Status(); err == nil && len(r.Interfaces) > 0 {
		ops := r.Interfaces[0].Sockops
		s.t.Logf("sock_ops over the run: caps set %d, switched to the cap CC %d, background CC %d, rLEDBAT window set %d, downlink caps set %d, closed %d",
			ops["cap_set"], ops["cc_switch"], ops["bg_cc"], ops["rwnd_set"], ops["coop_rwnd"], ops["closed"])
	}
}

// countableMaps names the maps whose entries could be counted in some sample, sorted.
func countableMaps(samples []soakSample) []string {
	names := map[string]bool{}
	for _, s := range samples {
		for n, v := range s.maps {
			names[n] = names[n] || v >= 0
		}
	}
	var cols []string
	for n, countable := range names {
		if countable {
			cols = append(cols, n)
		}
	}
	sortStrings(cols)
	return cols
}

// logSoakTable logs one row per sample, the maps' entries in cols.
func logSoakTable(t *testing.T, samples []soakSample, cols []string) {
	t.Logf("map columns: entries, and /stale (entries of a socket-cookie map whose socket is not open)")
	t.Logf("%8s %7s %5s %5s %8s %7s %4s %5s  %s", "t", "conns", "runs", "longs", "rss_kB", "threads", "fds", "regs", strings.Join(cols, " "))
	for _, s := range samples {
		var m []string
		for _, n := range cols {
			v := fmt.Sprint(s.maps[n])
			if st, ok := s.stale[n]; ok {
				v += fmt.Sprintf("/%d", st)
			}
			m = append(m, fmt.Sprintf("%*s", len(n), v))
		}
		t.Logf("%8v %7d %5d %5d %8d %7d %4d %5d  %s", s.at, s.conns, s.runs, s.longs, s.rssKB, s.threads, s.fds, s.regs, strings.Join(m, " "))
	}
}

// checkSoakEnd: the soak churned, and with every socket closed nothing of
// them remains (registrations, socket-cookie entries, tuples).
func checkSoakEnd(t *testing.T, samples []soakSample) {
	final := samples[len(samples)-1]
	if final.conns < 1000 {
		t.Errorf("only %d connections: the soak did not churn", final.conns)
	}
	if final.longs < soakLongFlows {
		t.Errorf("only %d long flows ended", final.longs)
	}
	if final.regs != 0 {
		t.Errorf("%d registrations remain after every socket closed", final.regs)
	}
	for n, v := range final.stale {
		if v != 0 {
			t.Errorf("%s: %d entries for closed sockets with every test socket closed", n, v)
		}
	}
	if v, ok := final.maps["lanes_tuple"]; ok && v > samples[0].maps["lanes_tuple"] {
		t.Errorf("lanes_tuple: %d entries with every socket closed, %d before the churn", v, samples[0].maps["lanes_tuple"])
	}
}

// The long flows: how many run at once, how long each lasts, and the
// downloads' pace.
const (
	soakLongFlows = 4
	soakLongFor   = 30 * time.Second
	soakDownRate  = 8 << 20 / 8 // bytes/s: 8 Mbit/s per download
)

// longFlow is one worker of long flows: uploads to dst (B's sink) or
// downloads from dst (B's paced source), soakLongFor each, replaced as
// they end; background ones are registered in the background lane.
type longFlow struct {
	ns                 *testutil.NetNS
	api, dst           string
	upload, background bool
}

func (l longFlow) run(t *testing.T, stop <-chan struct{}, done *atomic.Int64) {
	runtime.LockOSThread() // never unlocked: the thread stays in A and dies with us
	if err := netns.Set(l.ns.Handle); err != nil {
		t.Error(err)
		return
	}
	c, err := client.Dial(l.api)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-stop:
			return
		default:
		}
		// CUBIC, as the lab's uploads: the namespace's default may be
		// another CC (the machine may allow only BBR), which sock_ops
		// leaves alone, and the cap congestion control would never run
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
			})
			return serr
		}}
		conn, err := d.Dial("tcp4", l.dst)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if l.background {
			c.RegisterConn(conn, lane.Background)
		}
		end := time.Now().Add(soakLongFor)
		for time.Now().Before(end) {
			conn.SetDeadline(time.Now().Add(time.Second))
			if l.upload {
				_, err = conn.Write(buf)
			} else {
				_, err = conn.Read(buf)
			}
			if err != nil && !os.IsTimeout(err) {
				break
			}
			select {
			case <-stop:
				end = time.Now()
			default:
			}
		}
		conn.Close()
		done.Add(1)
	}
}

// serveSource sends to each connection at rate bytes/s (SO_MAX_PACING_RATE)
// until it closes.
func serveSource(ln net.Listener, rate int) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if raw, err := c.(*net.TCPConn).SyscallConn(); err == nil {
				raw.Control(func(fd uintptr) {
					unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, rate)
				})
			}
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// openCookies is the socket cookies of the TCP sockets open in ns
// (sock_diag, every state); nil if they cannot be read.
func openCookies(t *testing.T, ns *testutil.NetNS) map[uint64]bool {
	var flows []tcpmon.Flow
	var err error
	ns.Do(t, func() error {
		var s *tcpmon.Sampler
		s, err = tcpmon.New(tcpmon.Config{NoProcess: true, Backend: tcpmon.BackendDiag, States: ^uint32(0)})
		if err != nil {
			return nil
		}
		defer s.Close()
		flows, err = s.Sample()
		return nil
	})
	if err != nil {
		return nil
	}
	out := map[uint64]bool{}
	for _, f := range flows {
		out[f.Cookie] = true
	}
	return out
}

// logRange prints each figure's start, end and maximum.
func logRange(t *testing.T, samples []soakSample, cols []string) {
	row := func(name string, get func(soakSample) int) {
		m := 0
		for _, s := range samples {
			m = max(m, get(s))
		}
		t.Logf("%-18s start %8d end %8d max %8d", name, get(samples[0]), get(samples[len(samples)-1]), m)
	}
	row("rss_kB", func(s soakSample) int { return s.rssKB })
	row("threads", func(s soakSample) int { return s.threads })
	row("fds", func(s soakSample) int { return s.fds })
	for _, n := range cols {
		row(n, func(s soakSample) int { return s.maps[n] })
		if _, ok := samples[len(samples)-1].stale[n]; ok {
			row(n+" stale", func(s soakSample) int { return s.stale[n] })
		}
	}
}

// checkFlat fails if RSS, threads or fds peaked higher in the second half
// of the run than in the first by more than a margin: a leak grows with
// the churn, a steady daemon does not.
func checkFlat(t *testing.T, samples []soakSample) {
	if len(samples) < 4 {
		return
	}
	half := len(samples) / 2
	peak := func(ss []soakSample, get func(soakSample) int) int {
		m := 0
		for _, s := range ss {
			m = max(m, get(s))
		}
		return m
	}
	for _, c := range []struct {
		name  string
		get   func(soakSample) int
		slack func(int) int
	}{
		{"rss_kB", func(s soakSample) int { return s.rssKB }, func(v int) int { return v/4 + 4096 }},
		{"threads", func(s soakSample) int { return s.threads }, func(int) int { return 8 }},
		{"fds", func(s soakSample) int { return s.fds }, func(int) int { return 16 }},
	} {
		first, second := peak(samples[1:half], c.get), peak(samples[half:], c.get)
		if second > first+c.slack(first) {
			t.Errorf("%s grew: peak %d in the first half, %d in the second", c.name, first, second)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// procStatus returns VmRSS (kB) and Threads of a process.
func procStatus(pid int) (rss, threads int) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "Threads:":
			threads, _ = strconv.Atoi(f[1])
		}
	}
	return rss, threads
}

// cookieMaps are the maps keyed by socket cookie: each entry belongs to
// one socket and must go when it closes.
var cookieMaps = map[string]bool{"lanes_cookie": true, "lanes_sock_cap": true, "lanes_sock_seen": true, "lanes_sock_rwnd": true}

// mapEntries counts the entries of every BPF map the process holds open
// (found through /proc/PID/fdinfo); -1 for maps that cannot be iterated
// (socket storage) or have fixed size (arrays: their max_entries). For the
// socket-cookie maps, stale counts the keys not in open (when known).
func mapEntries(pid int, open map[uint64]bool) (out, stale map[string]int) {
	out, stale = map[string]int{}, map[string]int{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", pid))
	seen := map[uint32]bool{}
	for _, fd := range fds {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		var id uint32
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "map_id:"); ok {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
				id = uint32(n)
			}
		}
		if id == 0 || seen[id] {
			continue
		}
		seen[id] = true
		m, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			continue
		}
		info, err := m.Info()
		if err != nil || !strings.HasPrefix(info.Name, "lanes") {
			m.Close()
			continue
		}
		out[info.Name] = countEntries(m, info)
		if cookieMaps[info.Name] && open != nil {
			stale[info.Name] = staleCookies(m, open)
		}
		m.Close()
	}
	return out, stale
}

// staleCookies counts the keys of a socket-cookie map that are no open
// socket's cookie.
func staleCookies(m *ebpf.Map, open map[uint64]bool) int {
	n := 0
	key, err := m.NextKeyBytes(nil)
	for i := 0; err == nil && key != nil && i < 1<<22; i++ {
		if len(key) == 8 && !open[binary.LittleEndian.Uint64(key)] {
			n++
		}
		key, err = m.NextKeyBytes(key)
	}
	return n
}

func countEntries(m *ebpf.Map, info *ebpf.MapInfo) int {
	switch info.Type {
	case ebpf.Hash, ebpf.LRUHash, ebpf.LPMTrie, ebpf.PerCPUHash, ebpf.LRUCPUHash:
	default:
		return -1
	}
	n := 0
	key, err := m.NextKeyBytes(nil)
	for err == nil && key != nil && n < 1<<22 {
		n++
		key, err = m.NextKeyBytes(key)
	}
	return n
}
