// apps.go: the per-application experiment of docs/papers.md §002. One host streams at
// a constant bit rate over TCP (realtime lane), three hosts upload a file each
// (background lane), all through one emulated AP. Settings:
//
//   - alone:        the stream without uploads (its cwnd and delay for reference)
//   - no caps:      plain TCP
//   - uploads 30:   the uploaders' cwnd capped at 30 segments (a lanes rule)
//   - stream 20:    the stream's cwnd capped at 20 (a lanes rule)
//   - lanes:        lanes' cooperative demand-aware caps (the stream's small
//     demand is met first, the uploads share the rest without a standing queue)
//
// In the lanes settings every host runs `lanes daemon` with that setting's
// `coop:` section (rules, cooperative on or off); the stream and the uploads
// register their connections in their lanes through the daemon's API.
//
// Measured: upload completion times; the stream's delivery delay (send
// stamp to arrival, one clock), jitter (mean |delay change| between chunks),
// stalls (arrival gaps over 1 s) and late chunks (delay over 1 s); the
// stream's cwnd (the paper: ~40 alone, ~20 beside three uploads).
package coop

import (
	"context"
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lane"
)

// appsSetting is one row of the apps experiment.
type appsSetting struct {
	Name    string
	Uploads bool
	Lanes   bool
	Coop    bool
	Rules   []config.CoopRule
}

var appsSettings = []appsSetting{
	{Name: "alone"},
	{Name: "no caps", Uploads: true},
	{Name: "uploads 30", Uploads: true, Lanes: true, Rules: []config.CoopRule{{Name: "uploads-30", Lane: "background", Segments: 30}}},
	{Name: "stream 20", Uploads: true, Lanes: true, Rules: []config.CoopRule{{Name: "stream-20", Lane: "realtime", Segments: 20}}},
	{Name: "lanes", Uploads: true, Lanes: true, Coop: true},
}

// appsRun is one setting's outcome.
type appsRun struct {
	Setting    string      `json:"setting"`
	UploadSecs []float64   `json:"upload_s"`
	DelayP50   float64     `json:"delay_p50_ms"`
	DelayP95   float64     `json:"delay_p95_ms"`
	DelayMax   float64     `json:"delay_max_ms"`
	JitterMs   float64     `json:"jitter_ms"`
	Stalls     int         `json:"stalls"`
	LatePct    float64     `json:"late_pct"`
	StreamCwnd float64     `json:"stream_cwnd_median"`
	StreamMbit float64     `json:"stream_delivered_mbit"`
	UploadCaps uint32      `json:"upload_cap_median,omitempty"`
	StreamCap  uint32      `json:"stream_cap_median,omitempty"`
	Series     *coopSeries `json:"series"`
}

func runApps(ctx context.Context, env *testbed.Env, c *coopCommon, s appsSetting, fileSize int64, streamRate float64, alone time.Duration) (*appsRun, error) {
	bc, err := c.bed(4, func(int) bool { return s.Lanes })
	if err != nil {
		return nil, err
	}
	bc.Coop.Cooperative = s.Coop
	bc.Coop.Rules = s.Rules
	cb, err := newCoopBed(ctx, env, bc)
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	if _, err := cb.startStream(rctx, 0, streamRate, 10_000, lane.Realtime); err != nil {
		return nil, err
	}
	var ups []*upload
	if s.Uploads {
		time.Sleep(2 * time.Second) // the stream is up first, as in the paper
		if ups, err = cb.startUploads(rctx, []int{1, 2, 3}, fileSize, lane.Background); err != nil {
			return nil, err
		}
	}
	upStart := time.Now()
	recCtx, recStop := context.WithCancel(ctx)
	go func() {
		defer recStop()
		if len(ups) == 0 {
			select {
			case <-time.After(alone):
			case <-ctx.Done():
			}
			return
		}
		for _, u := range ups {
			select {
			case <-u.done:
			case <-ctx.Done():
				return
			}
		}
	}()
	series, err := cb.record(recCtx, 200*time.Millisecond, 30*time.Minute, nil)
	end := time.Now()
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	run := &appsRun{Setting: s.Name, Series: series}
	for _, u := range ups {
		if e := u.end.Load(); e > 0 {
			run.UploadSecs = append(run.UploadSecs, time.Unix(0, e).Sub(u.start).Seconds())
		} else {
			run.UploadSecs = append(run.UploadSecs, math.NaN())
		}
	}
	// the stream over the uploads' period (or the whole alone run)
	from, to := upStart, end
	if len(ups) == 0 {
		from = start.Add(2 * time.Second)
	}
	run.summarizeStream(cb.stream, from, to)
	run.summarizeCaps(series)
	return run, nil
}

// summarizeStream fills the stream's figures from its datagrams sent
// between from and to: jitter, stalls (gaps above 1 s), the share later
// than 1 s, rate and delay percentiles.
func (run *appsRun) summarizeStream(st *streamSink, from, to time.Time) {
	st.mu.Lock()
	var d, at []float64
	f, t := float64(from.UnixNano())/1e9, float64(to.UnixNano())/1e9
	for i, x := range st.times {
		if x >= f && x <= t {
			d = append(d, st.delays[i])
			at = append(at, x)
		}
	}
	st.mu.Unlock()
	if len(d) < 2 {
		return
	}
	var jit float64
	late := 0
	for i := 1; i < len(d); i++ {
		jit += math.Abs(d[i] - d[i-1])
		if at[i]-at[i-1] > 1 {
			run.Stalls++
		}
	}
	for _, x := range d {
		if x > 1000 {
			late++
		}
	}
	run.JitterMs = jit / float64(len(d)-1)
	run.LatePct = 100 * float64(late) / float64(len(d))
	run.StreamMbit = float64(len(d)) * 10_000 * 8 / (at[len(at)-1] - at[0]) / 1e6
	sd := append([]float64(nil), d...)
	sort.Float64s(sd)
	run.DelayP50, run.DelayP95, run.DelayMax = testbed.Percentile(sd, 50), testbed.Percentile(sd, 95), sd[len(sd)-1]
}

// summarizeCaps fills the stream's median cwnd and cap (host 0) and the
// uploads' median cap (the other hosts) from the recorded series.
func (run *appsRun) summarizeCaps(series *coopSeries) {
	var cw []float64
	var upCaps, stCaps []int
	for _, row := range series.Samples {
		if row[0].Cwnd > 0 {
			cw = append(cw, float64(row[0].Cwnd))
		}
		if row[0].Cap > 0 {
			stCaps = append(stCaps, int(row[0].Cap))
		}
		for _, h := range row[1:] {
			if h.Cap > 0 {
				upCaps = append(upCaps, int(h.Cap))
			}
		}
	}
	if len(cw) > 0 {
		sort.Float64s(cw)
		run.StreamCwnd = testbed.Percentile(cw, 50)
	}
	medInt := func(v []int) uint32 {
		if len(v) == 0 {
			return 0
		}
		sort.Ints(v)
		return uint32(v[len(v)/2])
	}
	run.UploadCaps, run.StreamCap = medInt(upCaps), medInt(stCaps)
}

func init() {
	testbed.Register(testbed.Experiment{Name: "apps", Summary: "one TCP stream + three file uploads through one AP: caps per application (docs/papers.md §002)",
		Quick: "10 MB uploads, 15 s stream alone",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			var c coopCommon
			c.register(fs)
			size := fs.Int64("file-size", 30_000_000, "bytes each uploader sends")
			rateS := fs.Float64("stream-rate", 800_000, "stream bit rate, bit/s")
			settings := fs.String("settings", "alone,no caps,uploads 30,stream 20,lanes", "settings to run (comma separated)")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				alone := 30 * time.Second
				if env.Quick {
					*size, alone = 10_000_000, 15*time.Second
				}
				want := map[string]bool{}
				for _, s := range strings.Split(*settings, ",") {
					want[strings.TrimSpace(s)] = true
				}
				r := &testbed.Result{Experiment: "apps", Started: time.Now(), Params: c.params()}
				r.Params["file_size"], r.Params["stream_rate_bps"], r.Params["settings"] = *size, *rateS, *settings
				t := testbed.Table{Title: fmt.Sprintf("apps: 1 stream (%.1f Mbit/s, realtime lane) + 3 uploads of %d MB (background lane)", *rateS/1e6, *size/1_000_000),
					Columns: []string{"setting", "uploads s (mean / max)", "stream delay p50 / p95 / max ms", "jitter ms", "stalls", "late %", "stream Mbit/s", "stream cwnd", "caps up/stream"}}
				var runs []*appsRun
				for _, s := range appsSettings {
					if !want[s.Name] {
						continue
					}
					env.Printf("apps %s...\n", s.Name)
					run, err := runApps(ctx, env, &c, s, *size, *rateS, alone)
					if err != nil {
						return nil, fmt.Errorf("apps %s: %w", s.Name, err)
					}
					runs = append(runs, run)
					up := "-"
					if len(run.UploadSecs) > 0 {
						sum, mx := 0.0, 0.0
						for _, v := range run.UploadSecs {
							sum += v
							mx = math.Max(mx, v)
						}
						up = fmt.Sprintf("%.1f / %.1f", sum/float64(len(run.UploadSecs)), mx)
					}
					caps := "-"
					if run.UploadCaps > 0 || run.StreamCap > 0 {
						caps = fmt.Sprintf("%d/%d", run.UploadCaps, run.StreamCap)
					}
					t.Rows = append(t.Rows, []string{s.Name, up, fmt.Sprintf("%.0f / %.0f / %.0f", run.DelayP50, run.DelayP95, run.DelayMax),
						fmt.Sprintf("%.1f", run.JitterMs), fmt.Sprint(run.Stalls), fmt.Sprintf("%.1f", run.LatePct),
						fmt.Sprintf("%.2f", run.StreamMbit), fmt.Sprintf("%.0f", run.StreamCwnd), caps})
					env.Printf("  %s\n", strings.Join(t.Rows[len(t.Rows)-1], " | "))
				}
				r.Tables = []testbed.Table{t}
				r.Notes = []string{
					"paper (Android, one AP): stream cwnd ~40 alone, sometimes only ~20 beside 3 uploads; uploads capped at 30 -> stream fine, uploads ~20 s slower; stream capped at 20 -> uploads ~8 s faster, stream unharmed",
					"delay = arrival - intended send time of each 10 kB chunk (one clock); stalls = arrival gaps over 1 s; late = delay over 1 s; stream figures over the uploads' period",
					"caps = median applied cap (segments) of the uploads / the stream, from the daemons' coop status; rules and cooperative caps applied by each host's `lanes daemon` (sock_ops)",
				}
				r.Data = runs
				r.Environment = testbed.CaptureEnvironment(nil, env, nil)
				r.Duration = time.Since(r.Started)
				return r, nil
			}
		}})
}
