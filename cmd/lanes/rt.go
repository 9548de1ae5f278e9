// rt.go: `lanes rt`, the realtime lane's command-line client:
//   - `lanes rt send DST:PORT`: hand datagrams with deadlines to the daemon
//     (a test client) and summarize its decisions and reply latency; exit
//     status 1 when none was admitted.
//   - `lanes rt stats`: the daemon's per-flow realtime counters.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/rt"
)

func init() {
	register(&command{path: "rt", summary: "realtime lane: send datagrams with deadlines, show counters"})
	register(&command{path: "rt send", summary: "send datagrams with deadlines through the realtime lane", args: "DST:PORT",
		long: "Hands --count datagrams with deadlines to the daemon's realtime lane (the socket: --socket, else " +
			"LANES_RT_SOCKET, else " + rt.DefaultSocket + ") and prints how many it admitted, the refusals and " +
			"later drops by reason, and the reply latency. Exits 1 when none was admitted (not-granted included), " +
			"naming the reasons.",
		nargs: exactArgs(1, "one destination IP:PORT"), setup: rtSendCmd})
	register(&command{path: "rt stats", summary: "the realtime lane's counters", setup: rtStatsCmd})
}

type rtSendSummary struct {
	Sent       int             `json:"requests"`
	Admitted   int             `json:"admitted"`
	Refused    map[string]int  `json:"refused"`
	Dropped    map[string]int  `json:"dropped_after_admit"`
	ReplyP50us float64         `json:"reply_p50_us"`
	ReplyP99us float64         `json:"reply_p99_us"`
	ReplyMaxus float64         `json:"reply_max_us"`
	Deadline   config.Duration `json:"deadline"`
	Dst        netip.AddrPort  `json:"dst"`
	help       []string        // what fixes the refusals, when the policy does
}

// rtSocketFlag is --socket, by default the environment's LANES_RT_SOCKET
// (as for lanes_rt.h's applications) or the daemon's default socket.
func rtSocketFlag(fs *pflag.FlagSet, e *env) *string {
	def := e.getenv("LANES_RT_SOCKET")
	if def == "" {
		def = rt.DefaultSocket
	}
	return fs.String("socket", def, "the daemon's realtime socket (env LANES_RT_SOCKET)")
}

func rtSendCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := rtSocketFlag(fs, e)
	flow := fs.Uint("flow", 1, "flow id")
	deadline := fs.Duration("deadline", time.Millisecond, "deadline after the send call (transmission complete)")
	count := fs.Int("count", 10, "datagrams to send")
	interval := fs.Duration("interval", 3*time.Millisecond, "pause between datagrams")
	size := fs.Int("size", 1400, "payload bytes")
	asJSON := fs.Bool("json", false, "JSON output")
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return usageErrorf("need one destination DST:PORT")
		}
		dst, err := netip.ParseAddrPort(args[0])
		if err != nil {
			return usageErrorf("destination: %v", err)
		}
		if *count < 1 || *size < 0 || *size > rt.MaxPayload || *deadline <= 0 || *flow > 1<<32-1 {
			return usageErrorf("need count >= 1, 0 <= size <= %d, deadline > 0", rt.MaxPayload)
		}
		c, err := rt.Dial(*sock)
		if err != nil {
			return err
		}
		defer c.Close()
		sum, err := rtSend(ctx, c, uint32(*flow), dst, *deadline, *count, *interval, *size)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(sum); err != nil {
				return err
			}
		} else {
			writeRTSend(e, sum)
		}
		if sum.Admitted == 0 {
			err := fmt.Errorf("none of %d datagrams admitted (refused: %s)", sum.Sent, countsString(sum.Refused))
			if len(sum.help) > 0 {
				err = fmt.Errorf("%w: %s", err, strings.Join(sum.help, "; "))
			}
			return err
		}
		return nil
	}
}

// countsString prints counts by name, sorted: "a 2, b 1".
func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// rtSend sends count datagrams of size bytes to dst, interval apart, each
// with the deadline after its send call, and sums up the replies, the
// drops noticed after admission and the reply latency.
func rtSend(ctx context.Context, c *rt.Client, flow uint32, dst netip.AddrPort, deadline time.Duration, count int, interval time.Duration, size int) (*rtSendSummary, error) {
	sum := &rtSendSummary{Refused: map[string]int{}, Dropped: map[string]int{}, Deadline: config.Duration(deadline), Dst: dst}
	payload := make([]byte, size)
	var lat []float64
	for i := 0; i < count && ctx.Err() == nil; i++ {
		t0 := rt.Monotonic()
		res, err := c.Send(flow, dst, t0+int64(deadline), payload)
		if err != nil {
			return nil, err
		}
		lat = append(lat, float64(rt.Monotonic()-t0)/1e3)
		sum.Sent++
		if res.Admitted {
			sum.Admitted++
		} else {
			sum.Refused[res.Reason.String()]++
			if h := res.Reason.Help(); h != "" && !slices.Contains(sum.help, h) {
				sum.help = append(sum.help, h)
			}
		}
		if i+1 < count {
			time.Sleep(interval)
		}
	}
	time.Sleep(deadline) // let the last admitted ones be released or dropped
	for _, n := range c.Notices(true) {
		sum.Dropped[n.Reason.String()]++
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		sum.ReplyP50us = lat[len(lat)/2]
		sum.ReplyP99us = lat[min(len(lat)-1, len(lat)*99/100)]
		sum.ReplyMaxus = lat[len(lat)-1]
	}
	return sum, nil
}

// writeRTSend prints the summary of `lanes rt send`.
func writeRTSend(e *env, sum *rtSendSummary) {
	fmt.Fprintf(e.stdout, "%d datagrams to %s, deadline %v: %d admitted\n", sum.Sent, sum.Dst, sum.Deadline.D(), sum.Admitted)
	for _, m := range []struct {
		what string
		m    map[string]int
	}{{"refused", sum.Refused}, {"dropped after admission", sum.Dropped}} {
		keys := make([]string, 0, len(m.m))
		for k := range m.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(e.stdout, "  %s %s: %d\n", m.what, k, m.m[k])
		}
	}
	fmt.Fprintf(e.stdout, "reply latency: p50 %.1f us  p99 %.1f us  max %.1f us\n", sum.ReplyP50us, sum.ReplyP99us, sum.ReplyMaxus)
}

func rtStatsCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := rtSocketFlag(fs, e)
	asJSON := fs.Bool("json", false, "JSON output")
	return func(context.Context, []string) error {
		c, err := rt.Dial(*sock)
		if err != nil {
			return err
		}
		defer c.Close()
		raw, err := c.Stats()
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := fmt.Fprintf(e.stdout, "%s\n", raw)
			return err
		}
		var s rtlane.Snapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("stats reply: %w", err)
		}
		fmt.Fprintf(e.stdout, "realtime lane: rate %v, %d queued (%v of transmit time); %d connections (this one included), %d clients' own sockets attached\n",
			config.Rate(s.RateBps), s.Depth, time.Duration(s.BacklogNs), s.Conns, s.AppSocks)
		switch {
		case s.PMError != "":
			fmt.Fprintf(e.stdout, "CPU wake-up latency (pm_latency_us): not held: %s\n", s.PMError)
		case s.PMLatencyUS >= 0:
			fmt.Fprintf(e.stdout, "CPU wake-up latency (pm_latency_us): %d µs held while granted clients are connected\n", s.PMLatencyUS)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "uid\tflow\tadmitted\trejected\tsent\tbytes\tdropped-late\tsend-errors\tmin-margin")
		row := func(uid, flow string, c rtlane.Counters) {
			margin := "-"
			if c.Sent > 0 {
				margin = time.Duration(c.MinMarginNs).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", uid, flow, c.Admitted, c.Rejected, c.Sent, c.SentBytes, c.DroppedLate, c.SendErrors, margin)
		}
		for _, f := range s.Flows {
			row(fmt.Sprint(f.UID), fmt.Sprint(f.Flow), f.Counters)
		}
		row("all", "", s.Totals)
		return tw.Flush()
	}
}
