// flow.go: Flow, one sampled TCP socket as the monitor reports it, and its
// JSON-lines and CSV encodings (written by `lanes monitor`, read back by
// `lanes plot` and the lab).
//
// A Flow is flat on purpose: every field is one JSON key and one CSV column,
// named with its unit where it has one (_us, _bps, _bytes). The CSV header
// is the list of JSON keys in struct order, so both formats decode through
// the same table (see columns).
package tcpmon

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
)

// Flow is one TCP socket at one sample time.
type Flow struct {
	Time   time.Time `json:"time"`
	Cookie uint64    `json:"cookie"`
	Src    string    `json:"src"` // local address:port
	Dst    string    `json:"dst"` // remote address:port
	State  string    `json:"state"`
	Lane   lane.Lane `json:"lane"`
	Why    string    `json:"why,omitempty"` // what decided the lane (from the daemon)
	// The cooperative controller's caps in force (from the daemon, 0 =
	// none): the cwnd cap of an upload, segments, and the downlink cap of a
	// download, bytes of receive window.
	CwndCap uint32 `json:"cwnd_cap,omitempty"`
	RwndCap uint32 `json:"rwnd_cap_bytes,omitempty"`
	// Held: a background flow while the yield holds the background lane
	// (from the daemon): its window is kept at the minimum, so its srtt is
	// its wait behind the foreground, not the path's.
	Held bool `json:"held,omitempty"`
	// Queued: a background flow while the background lane holds a backlog
	// in lanes' queue (from the daemon's status): the other lanes are
	// served first, so its srtt is mostly that wait.
	Queued   bool   `json:"queued,omitempty"`
	PID      int    `json:"pid"`
	Comm     string `json:"comm"`
	UID      uint32 `json:"uid"`
	Inode    uint32 `json:"inode"`
	CgroupID uint64 `json:"cgroup"`
	DSCP     uint8  `json:"dscp,omitempty"` // the socket's own marking (sock_diag; 0 from the BPF iterator)
	Cong     string `json:"cong"`
	// AppCong: the congestion control the app asked for and did not get
	// (a background socket keeps LEDBAT++; from the daemon, "" = none).
	AppCong string `json:"app_cong,omitempty"`

	CAState      string `json:"ca_state"`
	Cwnd         uint32 `json:"cwnd"`     // segments
	SSThresh     uint32 `json:"ssthresh"` // segments; 2147483647 = infinite
	MSS          uint32 `json:"mss_bytes"`
	SRTT         uint32 `json:"srtt_us"`
	RTTVar       uint32 `json:"rttvar_us"`
	MinRTT       uint32 `json:"min_rtt_us"`
	RTO          uint32 `json:"rto_us"`
	Retransmits  uint8  `json:"retransmits"` // consecutive, of the head segment
	TotalRetrans uint32 `json:"total_retrans"`
	Lost         uint32 `json:"lost"`
	Unacked      uint32 `json:"unacked"` // segments in flight
	Sacked       uint32 `json:"sacked"`
	BytesSent    uint64 `json:"bytes_sent"`
	BytesAcked   uint64 `json:"bytes_acked"`
	BytesRecv    uint64 `json:"bytes_received"`
	BytesRetrans uint64 `json:"bytes_retrans"`
	DeliveryRate uint64 `json:"delivery_rate_bps"` // kernel estimate, bits/s
	PacingRate   uint64 `json:"pacing_rate_bps"`   // bits/s (0 = unpaced)
	Notsent      uint32 `json:"notsent_bytes"`
	SendQ        uint32 `json:"send_q_bytes"` // unacked + unsent bytes
	RecvQ        uint32 `json:"recv_q_bytes"` // received, not yet read
	SndWnd       uint32 `json:"snd_wnd_bytes"`
	RcvRTT       uint32 `json:"rcv_rtt_us"` // receive-side RTT estimate
	WmemQueued   uint32 `json:"wmem_queued_bytes"`
	SndBuf       uint32 `json:"sndbuf_bytes"`
	RcvBuf       uint32 `json:"rcvbuf_bytes"`
	Drops        uint32 `json:"drops"`
	// Sending time and the part of it limited by the peer's receive window
	// or our send buffer (tcpi_busy_time, _rwnd_limited, _sndbuf_limited);
	// AppLimited: the last delivery rate sample was application-limited.
	BusyTime      uint64 `json:"busy_us"`
	RwndLimited   uint64 `json:"rwnd_limited_us"`
	SndbufLimited uint64 `json:"sndbuf_limited_us"`
	AppLimited    bool   `json:"app_limited"`

	// Computed between two samples of the same socket (0 on the first).
	Throughput float64 `json:"throughput_bps"` // bytes_acked delta, bits/s
	RecvRate   float64 `json:"recv_bps"`       // bytes_received delta, bits/s
}

// Key names the flow for people: "src->dst".
func (f *Flow) Key() string { return f.Src + "->" + f.Dst }

// CongLabel is the congestion control as people read it: the one that
// runs, and the app's request beside it when it differs, "ledbat (app:
// cubic)".
func (f *Flow) CongLabel() string {
	if f.AppCong == "" {
		return f.Cong
	}
	return f.Cong + " (app: " + f.AppCong + ")"
}

// column is one field of Flow as a JSON key / CSV column.
type column struct {
	name  string
	index int
}

var columns = func() []column {
	t := reflect.TypeFor[Flow]()
	cols := make([]column, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		cols = append(cols, column{name: name, index: i})
	}
	return cols
}()

// CSVHeader is the CSV header line's fields.
func CSVHeader() []string {
	h := make([]string, len(columns))
	for i, c := range columns {
		h[i] = c.name
	}
	return h
}

// CSVRecord formats f as CSV fields in CSVHeader order.
func (f *Flow) CSVRecord() []string {
	v := reflect.ValueOf(f).Elem()
	out := make([]string, len(columns))
	for i, c := range columns {
		fv := v.Field(c.index)
		switch x := fv.Interface().(type) {
		case time.Time:
			out[i] = x.UTC().Format(time.RFC3339Nano)
		case lane.Lane:
			out[i] = x.String()
		case float64:
			out[i] = strconv.FormatFloat(x, 'f', -1, 64)
		case string:
			out[i] = x
		default:
			out[i] = fmt.Sprint(x)
		}
	}
	return out
}

func setField(fv reflect.Value, s string) error {
	switch x := fv.Addr().Interface().(type) {
	case *time.Time:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		*x = t
	case *lane.Lane:
		if s == "" || s == "unset" {
			*x = lane.Unset
			return nil
		}
		return x.UnmarshalText([]byte(s))
	case *string:
		*x = s
	case *bool:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		*x = v
	case *float64:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		*x = v
	default:
		switch fv.Kind() {
		case reflect.Int, reflect.Int64, reflect.Int32:
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return err
			}
			fv.SetInt(v)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v, err := strconv.ParseUint(s, 10, fv.Type().Bits())
			if err != nil {
				return err
			}
			fv.SetUint(v)
		default:
			return fmt.Errorf("unsupported field kind %s", fv.Kind())
		}
	}
	return nil
}

// Encoder writes flows as JSON lines or CSV.
type Encoder struct {
	w       io.Writer
	csv     *csv.Writer
	wroteHd bool
}

// NewJSONEncoder writes one JSON object per flow per line.
func NewJSONEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// NewCSVEncoder writes a header line, then one line per flow.
func NewCSVEncoder(w io.Writer) *Encoder { return &Encoder{w: w, csv: csv.NewWriter(w)} }

// Encode writes the flows of one sample.
func (e *Encoder) Encode(flows []Flow) error {
	if e.csv != nil {
		if !e.wroteHd {
			if err := e.csv.Write(CSVHeader()); err != nil {
				return err
			}
			e.wroteHd = true
		}
		for i := range flows {
			if err := e.csv.Write(flows[i].CSVRecord()); err != nil {
				return err
			}
		}
		e.csv.Flush()
		return e.csv.Error()
	}
	bw := bufio.NewWriter(e.w)
	enc := json.NewEncoder(bw)
	for i := range flows {
		if err := enc.Encode(&flows[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// UnmarshalJSON decodes a flow; its lane may be "unset" (what an unknown
// lane marshals to), which lane.Lane itself does not parse.
func (f *Flow) UnmarshalJSON(b []byte) error { return decodeFlowJSON(b, f, false) }

func decodeFlowJSON(b []byte, f *Flow, strict bool) error {
	type plain Flow // no methods: no recursion
	aux := struct {
		*plain
		Lane string `json:"lane"`
	}{plain: (*plain)(f)}
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	f.Lane = lane.Unset
	if aux.Lane != "" && aux.Lane != "unset" {
		l, err := lane.Parse(aux.Lane)
		if err != nil {
			return err
		}
		f.Lane = l
	}
	return nil
}

// LineError says which line of a monitor file is bad and why.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadFlows reads a file written by Encoder, JSON lines or CSV (detected
// from the first non-blank byte). A line that does not decode, a truncated
// last line or a CSV row of the wrong width is a *LineError naming the line.
func ReadFlows(r io.Reader) ([]Flow, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := br.Peek(1)
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file")
	}
	if err != nil {
		return nil, err
	}
	if first[0] == '{' {
		return readJSONFlows(br)
	}
	return readCSVFlows(br)
}

// udpRecord marks the UDP flows' records (internal/udpflow) that `lanes
// monitor --json` writes beside the TCP flows'; TCP records have no proto.
const udpRecord = `"proto":"udp"`

func readJSONFlows(r *bufio.Reader) ([]Flow, error) {
	var flows []Flow
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) == 0 && errors.Is(err, io.EOF) {
			return flows, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return flows, &LineError{line, err}
		}
		trimmed := strings.TrimSpace(string(b))
		if trimmed == "" {
			continue
		}
		if err != nil && b[len(b)-1] != '\n' && !json.Valid([]byte(trimmed)) {
			return flows, &LineError{line, errors.New("truncated line (file ends mid-record)")}
		}
		if strings.Contains(trimmed, udpRecord) {
			continue // a UDP flow's record (lanes monitor --json writes them beside)
		}
		var f Flow
		if err := decodeFlowJSON([]byte(trimmed), &f, true); err != nil {
			return flows, &LineError{line, fmt.Errorf("bad JSON record: %w", err)}
		}
		if f.Time.IsZero() {
			return flows, &LineError{line, errors.New(`record has no "time"`)}
		}
		flows = append(flows, f)
	}
}

// lastByteReader remembers the last byte read, to tell a file cut short.
type lastByteReader struct {
	r    io.Reader
	last byte
}

func (l *lastByteReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

func readCSVFlows(r io.Reader) ([]Flow, error) {
	lr := &lastByteReader{r: r}
	cr := csv.NewReader(lr)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	hdr, err := cr.Read()
	if err != nil {
		return nil, &LineError{1, fmt.Errorf("bad CSV header: %w", err)}
	}
	idx := map[string]int{}
	for i, c := range columns {
		idx[c.name] = i
	}
	colOf := make([]int, len(hdr))
	for i, h := range hdr {
		j, ok := idx[h]
		if !ok {
			return nil, &LineError{1, fmt.Errorf("unknown CSV column %q (not a monitor file?)", h)}
		}
		colOf[i] = j
	}
	width := len(hdr)
	hdr = nil
	var flows []Flow
	lastLine := 1
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			if lr.last != '\n' && len(flows) > 0 {
				return flows[:len(flows)-1], &LineError{lastLine, errors.New("truncated line (file ends mid-record)")}
			}
			return flows, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return flows, &LineError{pe.StartLine, pe.Err}
			}
			return flows, &LineError{lastLine + 1, err}
		}
		line, _ := cr.FieldPos(0)
		lastLine = line
		if len(rec) != width {
			return flows, &LineError{line, fmt.Errorf("%d fields, header has %d (truncated line?)", len(rec), width)}
		}
		var f Flow
		v := reflect.ValueOf(&f).Elem()
		for i, s := range rec {
			c := columns[colOf[i]]
			if err := setField(v.Field(c.index), s); err != nil {
				return flows, &LineError{line, fmt.Errorf("column %s: %w", c.name, err)}
			}
		}
		if f.Time.IsZero() {
			return flows, &LineError{line, errors.New("record has no time")}
		}
		flows = append(flows, f)
	}
}

// ReadEvents reads a file of event-mode JSON lines (`lanes monitor --events
// --json`); a bad or truncated line is a *LineError naming it.
func ReadEvents(r io.Reader) ([]Event, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var evs []Event
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && errors.Is(err, io.EOF) {
			if len(evs) == 0 {
				return nil, errors.New("no events")
			}
			return evs, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return evs, &LineError{line, err}
		}
		trimmed := bytes.TrimSpace(b)
		if len(trimmed) == 0 {
			continue
		}
		if err != nil && !json.Valid(trimmed) {
			return evs, &LineError{line, errors.New("truncated line (file ends mid-record)")}
		}
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		var e Event
		if err := dec.Decode(&e); err != nil {
			return evs, &LineError{line, fmt.Errorf("bad JSON event: %w", err)}
		}
		if e.Time.IsZero() || e.Kind == "" {
			return evs, &LineError{line, errors.New(`event has no "time" or "kind"`)}
		}
		evs = append(evs, e)
	}
}

// IsEventFile reports whether the start of a monitor file looks like event
// mode output (its first record has a "kind").
func IsEventFile(head []byte) bool {
	line, _, _ := bytes.Cut(bytes.TrimSpace(head), []byte("\n"))
	return bytes.HasPrefix(line, []byte("{")) && bytes.Contains(line, []byte(`"kind":`))
}

// ProbeFlows turns the probe events of a trace into Flow records (time,
// addresses, cwnd, ssthresh, srtt, snd_wnd and bytes_acked accumulated from
// snd_una), so per-ACK traces plot like samples. CAState is "-": unknown.
func ProbeFlows(evs []Event) []Flow {
	type st struct {
		una   uint32
		acked uint64
	}
	by := map[string]*st{}
	owner := map[string]Event{} // start events of active opens name the process
	for _, e := range evs {
		if e.Kind == "start" && e.PID != 0 {
			owner[e.Src+"->"+e.Dst] = e
		}
	}
	var out []Flow
	for i := range evs {
		e := &evs[i]
		if e.Kind != "probe" {
			continue
		}
		k := e.Src + "->" + e.Dst
		s := by[k]
		if s == nil {
			s = &st{una: e.SndUna}
			by[k] = s
		}
		if d := e.SndUna - s.una; d < 1<<31 { // sequence arithmetic; older ACKs ignored
			s.acked += uint64(d)
			s.una = e.SndUna
		}
		out = append(out, Flow{Time: e.Time, Cookie: e.Cookie, Src: e.Src, Dst: e.Dst, State: "ESTAB", CAState: "-",
			Cwnd: e.Cwnd, SSThresh: e.SSThresh, SRTT: e.SRTT, SndWnd: e.SndWnd, BytesAcked: s.acked,
			PID: int(owner[k].PID), Comm: owner[k].Comm})
	}
	return out
}
