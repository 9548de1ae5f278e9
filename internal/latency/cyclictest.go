// cyclictest.go: run rt-tests' cyclictest the same way as our tester (same
// period, loops, policy, priority, threads, affinity, histogram bound, netns)
// and read its JSON result into the same Result type, so the two can be
// printed side by side.
package latency

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/lanes-net/lanes/internal/pmqos"
)

// CyclictestArgs returns cyclictest's arguments for c (without the binary).
func CyclictestArgs(c Config, loops int, jsonPath string) []string {
	prio := c.Priority
	if c.Policy == "other" || c.Policy == "idle" {
		prio = 0
	}
	args := []string{"-q", "-d", "0",
		"-i", strconv.FormatInt(c.Period.Microseconds(), 10),
		"-l", strconv.Itoa(loops),
		"-p", strconv.Itoa(prio), "--policy=" + c.Policy,
		"-t", strconv.Itoa(max(1, c.Threads)),
		"-h", strconv.FormatInt(c.HistMax.Microseconds(), 10),
		"--json=" + jsonPath}
	if len(c.Affinity) > 0 {
		cpus := make([]string, len(c.Affinity))
		for i, a := range c.Affinity {
			cpus[i] = strconv.Itoa(a)
		}
		args = append(args, "-a", strings.Join(cpus, ","))
	}
	if c.Mlock {
		args = append(args, "-m")
	}
	if c.PMLatency >= 0 {
		args = append(args, "--latency="+strconv.Itoa(c.PMLatency))
	} else {
		args = append(args, "--laptop") // leaves /dev/cpu_dma_latency alone
	}
	return args
}

// RunCyclictest runs cyclictest as configured; if nl is set it runs inside
// the tested host's namespace of that net load, like our threads.
func RunCyclictest(c Config, nl *NetLoad) (*Result, error) {
	if c.HistMax == 0 {
		c.HistMax = DefaultConfig().HistMax
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("cyclictest")
	if err != nil {
		return nil, fmt.Errorf("cyclictest not found (install rt-tests): %w", err)
	}
	loops := c.Loops
	if loops <= 0 {
		loops = max(1, int(c.Duration/c.Period))
	}
	dir, err := os.MkdirTemp("", "lanes-cyclictest")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	jp := filepath.Join(dir, "out.json")
	args := CyclictestArgs(c, loops, jp)
	cmd := exec.Command(bin, args...)
	if nl != nil {
		f, err := nsFile(nl.Host)
		if err != nil {
			return nil, fmt.Errorf("netns for cyclictest: %w", err)
		}
		defer f.Close()
		cmd = exec.Command("nsenter", append([]string{"--net=/proc/self/fd/3", bin}, args...)...)
		cmd.ExtraFiles = []*os.File{f}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("cyclictest %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 3))
	}
	b, err := os.ReadFile(jp)
	if err != nil {
		return nil, fmt.Errorf("cyclictest result: %w", err)
	}
	res, err := ParseCyclictestJSON(b, c.HistMax.Microseconds())
	if err != nil {
		return nil, err
	}
	res.PeriodUS, res.Policy, res.Priority = c.Period.Microseconds(), c.Policy, c.Priority
	res.PMLatencyUS = -1
	if _, err := os.Stat(pmqos.Path); err == nil && c.PMLatency >= 0 {
		res.PMLatencyUS = c.PMLatency
	}
	for i := range res.Threads {
		res.Threads[i].CPU = -1
		if len(c.Affinity) > 0 {
			res.Threads[i].CPU = c.Affinity[i%len(c.Affinity)]
		}
	}
	return res, nil
}

// ParseCyclictestJSON reads cyclictest's --json output. Its per-thread
// histogram has 1 µs bins up to the -h bound; samples above it are counted
// in cycles but not in the histogram, which gives the overflow.
func ParseCyclictestJSON(b []byte, histMaxUS int64) (*Result, error) {
	var raw struct {
		Thread map[string]struct {
			Histogram map[string]uint64 `json:"histogram"`
			Cycles    uint64            `json:"cycles"`
			Min       float64           `json:"min"`
			Max       float64           `json:"max"`
			Avg       float64           `json:"avg"`
		} `json:"thread"`
	}
	// A thread with no cycles prints "avg": -nan, which is not JSON.
	b = nanRE.ReplaceAll(b, []byte("$1 0$2"))
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse cyclictest json: %w", err)
	}
	res := &Result{Tool: "cyclictest"}
	all := newHistUS(histMaxUS)
	for i := 0; i < len(raw.Thread); i++ {
		t, ok := raw.Thread[strconv.Itoa(i)]
		if !ok {
			return nil, fmt.Errorf("cyclictest json: thread %d missing", i)
		}
		h := newHistUS(histMaxUS)
		var inHist uint64
		for k, v := range t.Histogram {
			bin, err := strconv.Atoi(k)
			if err != nil || bin < 0 {
				return nil, fmt.Errorf("cyclictest json: bad histogram bin %q", k)
			}
			if bin < len(h.bins) {
				h.bins[bin] += v
			} else {
				h.overflow += v
			}
			inHist += v
		}
		if t.Cycles > inHist {
			h.overflow += t.Cycles - inHist
		}
		h.n = int(t.Cycles)
		// cyclictest reports whole microseconds; a thread that never ran
		// reports min 1000000 and max 0.
		if t.Cycles > 0 {
			h.min, h.max = int64(t.Min*1e3), int64(t.Max*1e3)
		}
		h.sum = t.Avg * 1e3 * float64(t.Cycles)
		res.Threads = append(res.Threads, ThreadResult{Thread: i, Stats: h.stats()})
		all.merge(h)
	}
	res.All = all.stats()
	return res, nil
}

var nanRE = regexp.MustCompile(`(:)\s*-?nan\b(,?)`)

func newHistUS(us int64) *hist {
	h := newHist(0)
	h.bins = make([]uint64, us)
	return h
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}
