// Package dashboard serves lanes' web dashboard: a page (web/) that shows,
// live, every TCP flow's congestion window, cap, srtt and rate over the last
// minutes (the cwnd visualisation of docs/papers.md §002), the lanes' counters, and the
// cooperative controller's N, peers and caps; and /metrics for Prometheus
// (internal/metrics).
//
// It samples with the TCP monitor itself and asks the daemon (when one runs)
// for the lanes of sockets, its status and the coop component's state. It only
// reads: nothing on the page changes lanes, so it binds to loopback by
// default and needs no authentication of its own.
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/metrics"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/udpflow"
	"github.com/lanes-net/lanes/web"
)

// Daemon is what the dashboard asks the lanes daemon: the *client.Client
// that `lanes dashboard` passes (checked below at compile time).
type Daemon interface {
	Status() (*client.Status, error)
	Component(name string) (json.RawMessage, error)
	SocketInfo(cookies []uint64) (client.SocketInfo, error)
	UDPFlows() ([]udpflow.Flow, int, error)
}

var _ Daemon = (*client.Client)(nil)

// Config configures a Server.
type Config struct {
	// Sampler takes the TCP samples; the server owns its Run loop.
	Sampler *tcpmon.Sampler
	// Daemon answers lanes, status and coop state; nil shows flows only.
	Daemon Daemon
	// History is how far back each flow's series reaches (default 2 min).
	History time.Duration
	// MaxFlows bounds the flows kept with a series (default 200, busiest first).
	MaxFlows int
	// Hide are the dashboard's own listening addresses: its HTTP
	// connections are not shown (an unspecified address matches any).
	Hide []netip.AddrPort
	Log  *slog.Logger
	// Hosts are names, besides addresses and localhost, that requests may
	// give as Host (serve.go: DNS rebinding).
	Hosts []string
	// SeesAll says whether a client's uid, besides root, sees every
	// flow's pid and comm (the policy's access group; viewer.go); nil:
	// root alone.
	SeesAll func(uid uint32) bool
	// MaxConns, WriteTimeout, IdleTimeout bound the HTTP server (serve.go;
	// 0: the defaults).
	MaxConns     int
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
}

// Point is one sample of one flow: seconds since the server started, cwnd
// (segments), the cap in force (segments, 0 = none), srtt (ms), throughput
// (Mbit/s, bytes acked); for downloads the receive rate (Mbit/s) and the
// downlink cap in force (bytes of receive window, 0 = none).
type Point struct {
	T       float64 `json:"t"`
	Cwnd    uint32  `json:"cwnd"`
	Cap     uint32  `json:"cap"`
	SRTT    float64 `json:"srtt_ms"`
	Rate    float64 `json:"mbit"`
	Recv    float64 `json:"recv_mbit"`
	DownCap uint32  `json:"down_cap"`
	// Held: a background flow while the yield holds the background lane
	// (the foreground carries traffic): its window is kept at the minimum,
	// so its srtt is mostly its wait, not the path.
	Held bool `json:"held,omitempty"`
	// Queued: a background flow while the background lane holds a backlog
	// in lanes' queue on some interface (the other lanes are served
	// first): its srtt is mostly that wait, not the path.
	Queued bool `json:"queued,omitempty"`
}

// FlowView is one flow on the page.
type FlowView struct {
	Cookie  uint64  `json:"cookie"`
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	Lane    string  `json:"lane"`
	Comm    string  `json:"comm,omitempty"`
	PID     int     `json:"pid,omitempty"`
	Cong    string  `json:"cong"`
	State   string  `json:"state"`
	Retrans uint32  `json:"total_retrans"`
	Points  []Point `json:"points"`
	uid     uint32  // the socket's owner: who else may see Comm and PID (viewer.go)
}

// LanePoint is one lane's rates at one sample, Mbit/s: up, what it sent
// (lanerate.go), and down, what its TCP flows received; its UDP sockets'
// (QUIC included) sent and received, between the daemon's last two
// listings.
type LanePoint struct {
	T       float64 `json:"t"`
	Mbit    float64 `json:"mbit"`
	Down    float64 `json:"down_mbit"`
	UDPUp   float64 `json:"udp_mbit"`
	UDPDown float64 `json:"udp_down_mbit"`
}

// LaneView is one lane's throughput series.
type LaneView struct {
	Lane   string      `json:"lane"`
	Points []LanePoint `json:"points"`
}

// Snapshot is what /api/snapshot returns.
type Snapshot struct {
	Now         float64         `json:"now"`
	Interval    float64         `json:"interval_s"`
	Flows       []FlowView      `json:"flows"`
	Lanes       []LaneView      `json:"lanes"`
	Daemon      *client.Status  `json:"daemon,omitempty"`
	DaemonError string          `json:"daemon_error,omitempty"`
	Coop        json.RawMessage `json:"coop,omitempty"`
	CoopError   string          `json:"coop_error,omitempty"`
	// CoopOff: the policy leaves the controller off, and why (no error).
	CoopOff     string `json:"coop_off,omitempty"`
	SampleError string `json:"sample_error,omitempty"`
	// UDPFlows: the daemon's UDP flows (QUIC included) with lane and why
	// (internal/udpflow); UDPMore: how many it left out; UDPError: why
	// there are none.
	UDPFlows []udpflow.Flow `json:"udp_flows"`
	UDPMore  int            `json:"udp_more,omitempty"`
	UDPError string         `json:"udp_error,omitempty"`
	// LaneSource: what Lanes' rates are, "queues" (what each lane's queues
	// sent, every protocol) or "flows" (the sum of its TCP flows: no
	// daemon status).
	LaneSource string `json:"lane_source"`
}

type series struct {
	view FlowView
	seen time.Time
}

// Server samples and serves. Create it with New, run Run, serve Handler.
type Server struct {
	cfg   Config
	start time.Time

	dmu sync.Mutex // one request at a time on the daemon connection

	mu        sync.Mutex
	flows     map[uint64]*series
	lanePts   map[string][]LanePoint
	laneCount *laneCounters // the last status's lane counters
	// laneSource: what the lane chart's last point came from
	// (laneSourceQueues, laneSourceFlows).
	laneSource string
	last       []tcpmon.Flow
	lanes      map[uint64]laneAnswer
	ccNames    map[string]string // lanes' congestion controls: kernel name -> "ledbat", "capcc"
	status     *client.Status
	statusErr  string
	coop       json.RawMessage
	coopErr    string
	coopOff    string
	sampleErr  string
	udp        []udpflow.Flow
	udpMore    int
	udpErr     string
	gen        uint64 // samples taken

	jmu     sync.Mutex        // the encoded snapshot (serve.go)
	json    []byte            // for viewers who see all
	jsonFor map[viewer][]byte // for the others, by viewer
	jsonGen uint64
}

// New returns a server; cfg.Sampler is required.
func New(cfg Config) *Server {
	if cfg.History <= 0 {
		cfg.History = 2 * time.Minute
	}
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = 200
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, start: time.Now(), flows: map[uint64]*series{}, lanes: map[uint64]laneAnswer{}, lanePts: map[string][]LanePoint{}}
}

// Run samples until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Sampler.Interval())
	defer t.Stop()
	for {
		s.tick()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tick takes one sample and refreshes the daemon's state.
func (s *Server) tick() {
	flows, sampleErr := s.cfg.Sampler.Sample()
	// withoutOwn and the lanes below change the flows: a copy, the sample
	// is the sampler's.
	flows = s.withoutOwn(slices.Clone(flows))
	now := time.Now()
	dv := daemonView{caps: map[uint64]uint32{}, downCaps: map[uint64]uint32{}}
	if d := s.cfg.Daemon; d != nil {
		s.dmu.Lock()
		dv.ask(d)
		dv.lanes, dv.ccNames = s.askLanes(d, flows, now)
		dv.askUDP(d)
		s.dmu.Unlock()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.status, s.statusErr, s.coop, s.coopErr, s.coopOff = dv.status, dv.statusErr, dv.coop, dv.coopErr, dv.coopOff
	udpflow.FillRates(s.udp, dv.udp)
	s.udp, s.udpMore, s.udpErr = dv.udp, dv.udpMore, dv.udpErr
	s.sampleErr = ""
	if sampleErr != nil {
		s.sampleErr = sampleErr.Error()
	}
	maps.Copy(s.lanes, dv.lanes)
	if len(dv.ccNames) > 0 {
		s.ccNames = dv.ccNames
	}
	t := now.Sub(s.start).Seconds()
	for i := range flows {
		s.addFlowPoint(&flows[i], t, now, &dv)
	}
	// A flow missing from a good sample has closed: it leaves the page now.
	for c, sr := range s.flows {
		if sampleErr == nil && !sr.seen.Equal(now) {
			delete(s.flows, c)
			delete(s.lanes, c)
		}
	}
	s.addLanePoints(t, flows, dv.udp, dv.status, now)
	s.last = append(s.last[:0], flows...)
}

// daemonView is what one tick learned from the daemon: its status, the
// coop component's state and each flow's caps and lane.
type daemonView struct {
	status             *client.Status
	coop               json.RawMessage
	statusErr, coopErr string
	coopOff            string            // the policy leaves coop off: why
	yielding           bool              // the yield holds background (some interface)
	bgQueued           bool              // the background lane holds a backlog (some interface)
	caps, downCaps     map[uint64]uint32 // by socket cookie: segments, bytes
	lanes              map[uint64]laneAnswer
	ccNames            map[string]string
	udp                []udpflow.Flow
	udpMore            int
	udpErr             string
}

// askUDP fills the UDP flows from d, with their processes.
func (dv *daemonView) askUDP(d Daemon) {
	var err error
	if dv.udp, dv.udpMore, err = d.UDPFlows(); err != nil {
		dv.udpErr = err.Error()
		return
	}
	udpflow.FillOwners(dv.udp, "/proc")
}

// laneAnswer is what the daemon said of a socket: its lane, the congestion
// control its app asked for and did not get (a background socket keeps
// LEDBAT++), and when it was asked.
type laneAnswer struct {
	l     lane.Lane
	appCC string
	asked time.Time
}

// reaskAfter: a background socket's answer is asked for again after this
// long, since its app may set a congestion control at any time.
const reaskAfter = 2 * time.Second

// ask fills the status and the coop component's state and caps from d.
func (dv *daemonView) ask(d Daemon) {
	var err error
	if dv.status, err = d.Status(); err != nil {
		dv.statusErr = err.Error()
	} else {
		dv.bgQueued = dv.status.BackgroundQueued()
	}
	if doc, err := d.Component("background"); err == nil {
		var ys struct {
			Yielding bool `json:"yielding"`
		}
		dv.yielding = json.Unmarshal(doc, &ys) == nil && ys.Yielding
	}
	c, err := d.Component("coop")
	var off *client.OffError
	if errors.As(err, &off) {
		dv.coopOff = off.Why
		return
	}
	if err != nil {
		dv.coopErr = err.Error()
		return
	}
	dv.coop = c
	var cs struct {
		Flows []struct {
			Cookie  uint64 `json:"cookie"`
			Cap     uint32 `json:"cap"`
			DownCap uint32 `json:"down_cap_bytes"`
		} `json:"flows"`
	}
	if json.Unmarshal(c, &cs) == nil {
		for _, f := range cs.Flows {
			dv.caps[f.Cookie] = f.Cap
			dv.downCaps[f.Cookie] = f.DownCap
		}
	}
}

// addFlowPoint appends flow f's point at t (seconds since the start) to its
// series, starting one while there is room, and drops points older than
// the history. s.mu is held.
func (s *Server) addFlowPoint(f *tcpmon.Flow, t float64, now time.Time, dv *daemonView) {
	if a, ok := s.lanes[f.Cookie]; ok {
		f.Lane, f.AppCong = a.l, a.appCC
	}
	if n, ok := s.ccNames[f.Cong]; ok {
		f.Cong = n
	}
	sr := s.flows[f.Cookie]
	if sr == nil {
		if len(s.flows) >= s.cfg.MaxFlows {
			return
		}
		sr = &series{}
		s.flows[f.Cookie] = sr
	}
	sr.seen = now
	sr.view = FlowView{Cookie: f.Cookie, Src: f.Src, Dst: f.Dst, Lane: laneName(f.Lane), Comm: f.Comm, PID: f.PID,
		Cong: f.CongLabel(), State: f.State, Retrans: f.TotalRetrans, Points: sr.view.Points, uid: f.UID}
	sr.view.Points = append(sr.view.Points, Point{T: round3(t), Cwnd: f.Cwnd, Cap: dv.caps[f.Cookie],
		SRTT: round3(float64(f.SRTT) / 1000), Rate: round3(f.Throughput / 1e6),
		Recv: round3(f.RecvRate / 1e6), DownCap: dv.downCaps[f.Cookie],
		Held: dv.yielding && f.Lane == lane.Background, Queued: dv.bgQueued && f.Lane == lane.Background})
	cut := 0
	for cut < len(sr.view.Points) && t-sr.view.Points[cut].T > s.cfg.History.Seconds() {
		cut++
	}
	sr.view.Points = sr.view.Points[cut:]
}

// withoutOwn drops the dashboard's own HTTP connections.
func (s *Server) withoutOwn(flows []tcpmon.Flow) []tcpmon.Flow {
	if len(s.cfg.Hide) == 0 {
		return flows
	}
	own := func(addr string) bool {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return false
		}
		for _, h := range s.cfg.Hide {
			if h.Port() == ap.Port() && (!h.Addr().IsValid() || h.Addr().IsUnspecified() || h.Addr() == ap.Addr().Unmap()) {
				return true
			}
		}
		return false
	}
	out := flows[:0]
	for _, f := range flows {
		if !own(f.Src) && !own(f.Dst) {
			out = append(out, f)
		}
	}
	return out
}

// askLanes asks the daemon for the lanes of cookies not known yet, and
// again for background sockets answered more than reaskAfter ago.
func (s *Server) askLanes(d Daemon, flows []tcpmon.Flow, now time.Time) (map[uint64]laneAnswer, map[string]string) {
	s.mu.Lock()
	var ask []uint64
	for i := range flows {
		a, ok := s.lanes[flows[i].Cookie]
		if flows[i].Cookie != 0 && (!ok || a.l == lane.Background && now.Sub(a.asked) > reaskAfter) {
			ask = append(ask, flows[i].Cookie)
		}
	}
	s.mu.Unlock()
	if len(ask) == 0 {
		return nil, nil
	}
	si, err := d.SocketInfo(ask)
	if err != nil {
		s.cfg.Log.Debug("lanes of sockets", "err", err)
		return nil, nil
	}
	out := make(map[uint64]laneAnswer, len(ask))
	for _, c := range ask {
		l, ok := si.Lanes[c]
		if !ok || l == lane.Unset {
			l = lane.Interactive
		}
		out[c] = laneAnswer{l: l, appCC: si.AppCC[c], asked: now}
	}
	return out, si.CCNames
}

func laneName(l lane.Lane) string {
	if l == lane.Unset {
		return "-"
	}
	return l.String()
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// Snapshot returns the current state, flows with the busiest first.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Now: round3(time.Since(s.start).Seconds()), Interval: s.cfg.Sampler.Interval().Seconds(),
		Daemon: s.status, DaemonError: s.statusErr, Coop: s.coop, CoopError: s.coopErr, CoopOff: s.coopOff, SampleError: s.sampleErr,
		Flows: []FlowView{}, UDPFlows: append([]udpflow.Flow{}, s.udp...), UDPMore: s.udpMore, UDPError: s.udpErr,
		LaneSource: s.laneSource}
	if s.cfg.Daemon == nil {
		snap.UDPError = "no daemon"
	}
	for _, l := range lane.All {
		snap.Lanes = append(snap.Lanes, LaneView{Lane: l.String(), Points: append([]LanePoint{}, s.lanePts[l.String()]...)})
	}
	for _, sr := range s.flows {
		v := sr.view
		v.Points = append([]Point(nil), v.Points...)
		snap.Flows = append(snap.Flows, v)
	}
	sort.Slice(snap.Flows, func(i, j int) bool {
		a, b := snap.Flows[i], snap.Flows[j]
		ra, rb := lastRate(a), lastRate(b)
		if ra != rb {
			return ra > rb
		}
		return a.Cookie < b.Cookie
	})
	return snap
}

func lastRate(v FlowView) float64 {
	if len(v.Points) == 0 {
		return 0
	}
	return v.Points[len(v.Points)-1].Rate
}

func encodeSnapshot(snap Snapshot) ([]byte, error) {
	b, err := json.Marshal(snap)
	return append(b, '\n'), err
}

// metricsSnapshot is the latest sample and daemon status, for /metrics.
func (s *Server) metricsSnapshot() metrics.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return metrics.Snapshot{Status: s.status, Flows: append([]tcpmon.Flow(nil), s.last...), UDP: slices.Clone(s.udp)}
}

// Handler serves the page, /api/snapshot and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(web.Assets))
	mux.HandleFunc("GET /api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		b, err := s.snapshotJSON(s.seesAll(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if _, err := w.Write(b); err != nil {
			s.cfg.Log.Debug("snapshot write", "err", err)
		}
	})
	reg := metrics.Registry(metrics.New(s.metricsSnapshot))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	return mux
}
