// coop.go: `lanes coop`, tools of the cooperative controller:
//   - `lanes coop table`: the cap table floor((rate x RTT - headroom) / (MSS x N));
//     its defaults reproduce the paper's 69, 57, 49, 43 segments for N = 5..8.
//   - `lanes coop peers`: listen on the LAN for a while and list the hosts
//     that announce themselves (shares the port with a running daemon).
//   - `lanes coop status`: the running daemon's controller: N, the rate, its
//     peers, and each local flow's cap (or why capping is off).
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/coop"
)

func init() {
	register(&command{path: "coop", summary: "cooperative cwnd caps: the cap table, peers on the LAN, the daemon's controller"})
	register(&command{path: "coop table", summary: "the paper's cwnd cap table for N hosts", setup: coopTableCmd})
	register(&command{path: "coop peers", summary: "listen for lanes announcements on a LAN interface", setup: coopPeersCmd})
	register(&command{path: "coop status", summary: "the daemon's coop controller: N, caps, peers", setup: coopStatusCmd})
}

// Paper parameters: 802.11g's ~20 Mbit/s real rate, 256 ms RTT, full-size
// 1,500-byte segments and a headroom of 120 KB (960 kbit) give exactly
// 69, 57, 49, 43 for N = 5..8. The paper says "120 Kbits"; with 120 kbit the
// table would read 83, 69, 59, 52, so their headroom was 120 kilobytes.
const (
	paperRate     = "20mbit"
	paperRTT      = 256 * time.Millisecond
	paperMSS      = 1500
	paperHeadroom = "960kbit"
)

func coopTableCmd(fs *pflag.FlagSet, e *env) runFunc {
	rateS := fs.String("rate", paperRate, "usable rate of the access point")
	rtt := fs.Duration("rtt", paperRTT, "round-trip time (the connection's min RTT)")
	mss := fs.Uint("mss", paperMSS, "segment size, bytes")
	headS := fs.String("headroom", paperHeadroom, "headroom subtracted from rate x RTT (e.g. 120kbit, 15KB)")
	from := fs.Int("from", 5, "smallest N")
	to := fs.Int("to", 8, "largest N")
	asJSON := fs.Bool("json", false, "JSON output")
	return func(context.Context, []string) error {
		rate, err := config.ParseRate(*rateS)
		if err != nil {
			return usageErrorf("--rate: %v", err)
		}
		head, err := config.ParseBits(*headS)
		if err != nil {
			return usageErrorf("--headroom: %v", err)
		}
		if *mss == 0 || *mss > 65535 || *from < 1 || *to < *from || *to > 1000 || *rtt <= 0 {
			return usageErrorf("need 0 < mss <= 65535, 1 <= from <= to <= 1000, rtt > 0")
		}
		rows := coop.CapTable(rate.Bits(), *rtt, uint64(head), uint32(*mss), *from, *to)
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(map[string]any{
				"rate_bits": rate.Bits(), "rtt_ms": float64(rtt.Microseconds()) / 1000, "mss": *mss,
				"headroom_bits": uint64(head), "rows": rows})
		}
		bdp := coop.SharedWindow(rate.Bits(), *rtt, uint64(head))
		fmt.Fprintf(e.stdout, "cap = floor((rate x RTT - headroom) / (MSS x N))\n")
		fmt.Fprintf(e.stdout, "rate %v  RTT %v  MSS %d B  headroom %v  -> shared window %.0f B = %.1f segments\n\n",
			rate, *rtt, *mss, head, bdp, bdp/float64(*mss))
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "N\tcap (segments)\twindow (bytes)\tper host (Mbit/s)\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.2f\t\n", r.N, r.Cap, r.Window, r.PerHost)
		}
		return tw.Flush()
	}
}

func coopPeersCmd(fs *pflag.FlagSet, e *env) runFunc {
	dev := fs.String("dev", "", "LAN interface to listen on (required)")
	port := fs.Uint("port", config.DefaultCoopPort, "announcement UDP port")
	keyHex := fs.String("key", "", "group key, hex")
	keyFile := fs.String("key-file", "", "file holding the group key")
	listen := fs.Duration("listen", 2*time.Second, "how long to listen")
	asJSON := fs.Bool("json", false, "JSON output")
	return func(ctx context.Context, args []string) error {
		if *dev == "" || *port == 0 || *port > 65535 {
			return usageErrorf("--dev is required and --port must be 1..65535")
		}
		cfg := config.DefaultCoop()
		cfg.Key, cfg.KeyFile = *keyHex, *keyFile
		key, err := cfg.LoadKey()
		if err != nil {
			return err
		}
		if key == nil {
			fmt.Fprintln(e.stderr, "warning: no key given: announcements are not authenticated")
		}
		tr, err := coop.ListenUDPOn(*dev, uint16(*port), coop.TransportBoth)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *listen)
		defer cancel()
		go func() { <-ctx.Done(); tr.Close() }()
		tb := coop.NewTable(cfg.Interval.D(), 1000, cfg.MaxClockSkew.D())
		drops := listenPeers(tr, tb, key)
		if *asJSON {
			return writePeersJSON(e, tb.Peers(), drops)
		}
		return writePeersTable(e, tb.Peers(), drops)
	}
}

// listenPeers reads announcements until the transport closes, enters the
// valid ones into tb and counts the others by reason.
func listenPeers(tr coop.Transport, tb *coop.Table, key []byte) map[string]int {
	drops := map[string]int{}
	buf := make([]byte, 2*coop.MaxSize)
	for {
		n, from, err := tr.Recv(buf)
		if err != nil {
			return drops
		}
		a, err := coop.Decode(buf[:n], key)
		if err == nil {
			_, err = tb.Accept(a, from, time.Now())
		}
		if err != nil {
			drops[coop.DropReason(err)]++
		}
	}
}

// writePeersJSON prints the peers heard and the drops as JSON.
func writePeersJSON(e *env, peers []coop.Peer, drops map[string]int) error {
	type jp struct {
		ID    string             `json:"id"`
		Addr  netip.Addr         `json:"addr"`
		Last  coop.Announcement  `json:"last"`
		Flows []coop.FlowSummary `json:"flows"`
		Seen  time.Time          `json:"last_seen"`
	}
	out := []jp{}
	for _, p := range peers {
		out = append(out, jp{ID: hex.EncodeToString(be64(p.ID)), Addr: p.Addr, Last: p.Last, Flows: p.Last.Flows, Seen: p.LastSeen})
	}
	return json.NewEncoder(e.stdout).Encode(map[string]any{"peers": out, "dropped": drops})
}

// writePeersTable prints one row per peer heard, then the drops by reason.
func writePeersTable(e *env, peers []coop.Peer, drops map[string]int) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tADDR\tFLOWS\tRT/INT/BG\tWAITING\tGOODPUT\tINTERVAL\tSEQ")
	for _, p := range peers {
		a := p.Last
		fmt.Fprintf(tw, "%016x\t%v\t%d\t%d/%d/%d\t%d\t%.2fMbit\t%v\t%d\n", p.ID, p.Addr, a.ActiveFlows,
			a.LaneMix[0], a.LaneMix[1], a.LaneMix[2], a.BytesWaiting, float64(a.GoodputKbit)/1000, a.Interval, a.Seq)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	keys := make([]string, 0, len(drops))
	for k := range drops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(e.stdout, "dropped %d: %s\n", drops[k], k)
	}
	return nil
}

func be64(v uint64) []byte {
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

func coopStatusCmd(fs *pflag.FlagSet, e *env) runFunc {
	sock := socketFlag(fs, e)
	asJSON := fs.Bool("json", false, "print the controller's status document")
	return func(context.Context, []string) error {
		c, _, err := dialDaemon(*sock)
		if err != nil {
			return err
		}
		defer c.Close()
		doc, err := c.Component("coop")
		var off *client.OffError
		if errors.As(err, &off) { // a state, not a failure: exit 0
			if *asJSON {
				return json.NewEncoder(e.stdout).Encode(map[string]string{"off": off.Why})
			}
			_, err := fmt.Fprintln(e.stdout, off.Error())
			return err
		}
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := fmt.Fprintf(e.stdout, "%s\n", doc)
			return err
		}
		var st coop.Status
		if err := json.Unmarshal(doc, &st); err != nil {
			return fmt.Errorf("coop status from the daemon: %w", err)
		}
		printCoopStatus(e, &st)
		return nil
	}
}

// estimateText is the estimator's state after the rate's source:
// ": cruise, best 19.3 Mbit/s, trim 0.98, last interval 18.9 Mbit/s at
// 1.06x RTT", or "" when the rate is configured.
func estimateText(es *coop.EstimateStatus) string {
	if es == nil {
		return ""
	}
	t := fmt.Sprintf(": %s, best %.3g Mbit/s", es.Phase, float64(es.BestBits)/1e6)
	if es.Trim < 1 {
		t += fmt.Sprintf(", trim %.2f", es.Trim)
	}
	if es.Probing {
		t += ", probing"
	}
	if es.Drained {
		t += ", drained"
	}
	if es.Inflation > 0 {
		t += fmt.Sprintf(", last interval %.3g Mbit/s at %.2fx RTT", float64(es.GroupGoodputBits)/1e6, es.Inflation)
	}
	return t
}

func printCoopStatus(e *env, st *coop.Status) {
	state := "capping"
	if !st.Capping {
		state = "not capping: " + st.Reason
	}
	auth := "authenticated"
	if !st.Authenticated {
		auth = fmt.Sprintf("unauthenticated (limited mode, %d active peers outside N)", st.Uncounted)
	}
	fmt.Fprintf(e.stdout, "host %s  N=%d  rate %.3g Mbit/s (%s%s)  %s  peers %s\n",
		st.HostID, st.N, float64(st.RateBits)/1e6, st.RateSource, estimateText(st.Estimate), state, auth)
	d := st.Down
	dstate := "capping"
	if !d.Capping {
		dstate = "not capping: " + d.Reason
	}
	fmt.Fprintf(e.stdout, "downlink  N=%d  rate %.3g Mbit/s (%s%s)  %s  share %.2f  goodput %.2f Mbit/s\n",
		d.N, float64(d.RateBits)/1e6, d.RateSource, estimateText(d.Estimate), dstate, d.SelfShare, float64(d.Goodput)/1e6)
	if a := d.AckClass; a != nil {
		if a.On {
			fmt.Fprintf(e.stdout, "ACK class  rate %.1f kbit/s (windows %.2f Mbit/s x ACK ratio %.4f x %.1f; sent %.1f kbit/s over the last %.0f ms)\n", float64(a.RateBits)/1e3,
				float64(a.WindowsBits)/1e6, a.Ratio, coop.AckClassFactor, float64(a.SentBits)/1e3, a.RTTms)
		} else {
			fmt.Fprintf(e.stdout, "ACK class  off: %s\n", a.Reason)
		}
	}
	if st.Warning != "" {
		fmt.Fprintf(e.stdout, "warning: %s\n", st.Warning)
	}
	cn := st.Counters
	fmt.Fprintf(e.stdout, "announcements: sent %d, received %d, accepted %d, dropped %d (forged %d, unauthenticated %d, replayed %d, stale %d, malformed %d, oversized %d, bad version %d, table full %d, new-peer rate %d, address conflict %d)\n",
		cn.Sent, cn.Received, cn.Accepted, cn.Dropped(), cn.Forged, cn.Unauthenticated, cn.Replayed, cn.Stale, cn.Malformed, cn.Oversized, cn.BadVersion,
		cn.TableFull, cn.PeerRate, cn.AddrConflict)
	if st.LastError != "" {
		fmt.Fprintf(e.stdout, "last error: %s\n", st.LastError)
	}
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tADDR\tACTIVE\tFLOWS\tWAITING\tGOODPUT\tSHARE\tDOWNLOADS\tDOWN GOODPUT\tFALLBACK\tLAST SEEN")
	for _, p := range st.Peers {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%.2fMbit\t%.2f\t%d\t%.2fMbit\t%s\t%v ago\n", p.ID, p.Addr, p.Active, p.Flows, p.Waiting,
			float64(p.GoodputBits)/1e6, p.Share, p.DownFlows, float64(p.DownGoodputBits)/1e6, peerFallback(p),
			st.Updated.Sub(p.LastSeen).Round(time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintln(e.stdout)
	tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COOKIE\tLANE\tAPP\tACTIVE\tMIN RTT\tMSS\tCWND\tCOOP CAP\tRULE\tCAP\tRECEIVING\tDOWN CAP (B)")
	for _, f := range st.Flows {
		recv := "-"
		if f.DownActive {
			recv = fmt.Sprintf("%.2fMbit", float64(f.RecvBits)/1e6)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%.2fms\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", f.Cookie, f.Lane, dash(f.App), f.Active, f.MinRTT,
			f.MSS, f.Cwnd, capText(f.Coop), dash(f.Rule), capText(f.Cap), recv, capText(f.DownCap))
	}
	tw.Flush()
}

func capText(c uint32) string {
	if c == 0 {
		return "-"
	}
	return fmt.Sprint(c)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// peerFallback says in which directions a peer announces that its fallback
// stopped its caps ("-": none).
func peerFallback(p coop.PeerStatus) string {
	switch {
	case p.UpStopped && p.DownStopped:
		return "up+down"
	case p.UpStopped:
		return "up"
	case p.DownStopped:
		return "down"
	}
	return "-"
}
