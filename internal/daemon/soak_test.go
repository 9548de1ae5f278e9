// soak_test.go: the churn soak. A daemon (device mode on A's veth, coop
// controller capping local flows) serves workers that, for the whole run,
// open TCP connections A -> B, register each through the API, send 16 KB
// and close, while `lanes run` starts short processes in the background
// lane. Every interval the daemon's RSS, threads, open fds, registrations
// and the entry count of every BPF map it holds are printed; at the end,
// with every socket closed, no registration and no tuple or cap entry may
// remain for them.
//
// Off by default (it is a benchmark, not a test of CI's budget):
//
//	LANES_SOAK=30m ./scripts/go test -count=1 -run TestSoakChurn -v ./internal/daemon/
//	LANES_SOAK=3m  ... (short run)
package daemon_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// soakSample is one row of the soak's figures.
type soakSample struct {
	at                  time.Duration
	conns, runs         int64
	rssKB, threads, fds int
	regs                int
	maps                map[string]int // name -> entries (-1: not countable)
}

func TestSoakChurn(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("LANES_SOAK"))
	if err != nil {
		t.Skip("soak benchmark: set LANES_SOAK=30m (or a shorter duration)")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	pol := fmt.Sprintf(`interfaces:
  - name: %s
coop:
  enabled: true
  port: 7311
  interval: 100ms
  state_file: %q
  headroom: 0
  ap_rate: 20gbit
  safety:
    enabled: false
`, p.LinkA, t.TempDir()+"/coop.json")
	d, sock := startDaemon(t, p.A, pol)
	pid := d.cmd.Process.Pid

	var ln net.Listener
	p.B.Do(t, func() (err error) { ln, err = net.Listen("tcp4", p.AddrB.String()+":0"); return err })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()

	var conns, runs, regErrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 4
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread stays in A and dies with us
			if err := netns.Set(p.A.Handle); err != nil {
				t.Error(err)
				return
			}
			c, err := api.Dial(sock)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 16<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				conn, err := net.Dial("tcp4", ln.Addr().String())
				if err != nil {
					continue
				}
				if _, err := c.RegisterConn(conn, lane.Background); err != nil {
					regErrs.Add(1)
				}
				conn.Write(buf)
				conn.Close()
				conns.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // lanes run: a short process in the background lane every 500 ms
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if err := p.A.Command(lanesBin, "run", "--socket", sock, "--lane", "background", "--", "true").Run(); err == nil {
				runs.Add(1)
			}
		}
	}()

	start := time.Now()
	every := max(dur/30, 5*time.Second)
	var samples []soakSample
	sample := func() soakSample {
		s := soakSample{at: time.Since(start).Round(time.Second), conns: conns.Load(), runs: runs.Load()}
		s.rssKB, s.threads = procStatus(pid)
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		s.fds = len(fds)
		s.maps = mapEntries(pid)
		if c, err := api.Dial(sock); err == nil {
			fl, _ := c.Flows()
			s.regs = len(fl)
			c.Close()
		}
		return s
	}
	samples = append(samples, sample())
	for time.Since(start) < dur {
		time.Sleep(every)
		samples = append(samples, sample())
	}
	close(stop)
	wg.Wait()
	// Every socket is closed: the sweep (every 2 s) must remove every
	// registration; wait for it (bounded), then the final sample.
	for i := 0; i < 300 && sample().regs > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	final := sample()
	samples = append(samples, final)

	names := map[string]bool{}
	for _, s := range samples {
		for n := range s.maps {
			names[n] = true
		}
	}
	var cols []string
	for n := range names {
		cols = append(cols, n)
	}
	sortStrings(cols)
	t.Logf("churn soak %v on a loaded machine: %d connections registered (%d register errors), %d lanes run", dur, final.conns, regErrs.Load(), final.runs)
	t.Logf("%8s %7s %5s %8s %7s %4s %5s  %s", "t", "conns", "runs", "rss_kB", "threads", "fds", "regs", strings.Join(cols, " "))
	for _, s := range samples {
		var m []string
		for _, n := range cols {
			m = append(m, fmt.Sprintf("%*d", len(n), s.maps[n]))
		}
		t.Logf("%8v %7d %5d %8d %7d %4d %5d  %s", s.at, s.conns, s.runs, s.rssKB, s.threads, s.fds, s.regs, strings.Join(m, " "))
	}
	if final.conns < 1000 {
		t.Errorf("only %d connections: the soak did not churn", final.conns)
	}
	if final.regs != 0 {
		t.Errorf("%d registrations remain after every socket closed", final.regs)
	}
	for _, n := range []string{"lanes_tuple", "lanes_sock_cap"} {
		if v, ok := final.maps[n]; ok && v > samples[0].maps[n] {
			t.Errorf("%s: %d entries with every socket closed, %d before the churn", n, v, samples[0].maps[n])
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

// mapEntries counts the entries of every BPF map the process holds open
// (found through /proc/PID/fdinfo); -1 for maps that cannot be iterated
// (socket storage) or have fixed size (arrays: their max_entries).
func mapEntries(pid int) map[string]int {
	out := map[string]int{}
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
		m.Close()
	}
	return out
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
