// helper.go: the traffic programs a lab run starts inside its hosts, as
// separate processes of the lanes binary (`lanes lab helper NAME ...`, run
// with `ip netns exec`):
//
//   - serve --listen ADDR   HTTP server: GET /data?bytes=N sends N bytes,
//     POST /sink reads the body and answers with its length; prints "ready".
//   - get --url URL --bytes N / post --url URL --bytes N   one foreground
//     request on a fresh connection; prints one JSON line (seconds, bytes,
//     the client's own CPU time). --app-cc NAME: see bulk.
//   - echo --listen ADDR / ping --to ADDR --count N   UDP echo and a UDP
//     ping that prints the round-trip times in ms as one JSON array;
//     icmp-ping --to IP the same over ICMP, timed by the kernel
//     (icmpping.go).
//   - blast --to ADDR --for D --size N   UDP datagrams as fast as possible.
//   - quic-serve / quic-bulk   QUIC bulk transfers either way (quic.go).
//   - bulk --url URL [--prio P] [--nice N]   a background uploader: one
//     endless POST; prints {"src":..,"dst":..} once connected (the paper's
//     3-tuple registration reads the source port the same way), then runs
//     until killed. --app-cc NAME: once connected, the helper sets its own
//     congestion control on the socket (TCP_CONGESTION, as iperf3 -C does)
//     and adds what the socket then runs to that line ("cc"); get prints
//     the same line first.
//
// Experiments add their own helpers with RegisterHelper (rtclient, one
// periodic flow through a realtime lane, comes with experiment deadline).
// Test binaries dispatch to HelperMain when LANES_LAB_HELPER=1.
package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SetCC sets a socket's congestion control (none: leave the default).
func SetCC(rc syscall.RawConn, cc string) error {
	if cc == "" {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("TCP_CONGESTION %s: %w", cc, serr)
	}
	return nil
}

// AppSetCC does what an application that picks its own congestion control
// does once connected (iperf3 -C NAME): TCP_CONGESTION on its socket. It
// returns the congestion control the socket runs afterwards, which is not
// NAME where something (lanes' background lane) keeps its own.
func AppSetCC(c net.Conn, name string) (string, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return "", fmt.Errorf("%T has no socket", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return "", err
	}
	if err := SetCC(rc, name); err != nil {
		return "", err
	}
	var now string
	var serr error
	if err := rc.Control(func(fd uintptr) { now, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) }); err != nil {
		return "", err
	}
	return now, serr
}

// appCCDial wraps a dial: with an app's congestion control (appCC not
// empty) it is set on every new connection, which is then announced as a
// BulkHello line; announce prints that line for every connection anyway.
func appCCDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), appCC string, announce bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hello := BulkHello{Src: c.LocalAddr().String(), Dst: c.RemoteAddr().String()}
		if appCC != "" {
			if hello.CC, err = AppSetCC(c, appCC); err != nil {
				c.Close()
				return nil, fmt.Errorf("the app's congestion control: %w", err)
			}
		}
		if announce || appCC != "" {
			b, _ := json.Marshal(hello)
			fmt.Println(string(b))
		}
		return c, nil
	}
}

// HelperResult is what get and post print.
type HelperResult struct {
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
	CPUNs   int64   `json:"cpu_ns"` // the client's user+system time
	Error   string  `json:"error,omitempty"`
}

// HelperMain runs a helper; args start with the helper's name. It returns
// the exit code.
func HelperMain(args []string) int {
	if len(args) > 1 && args[0] == "lab" && args[1] == "helper" {
		args = args[2:]
	}
	// A helper watches no context: SIGTERM ends it at once (the default
	// action), instead of leaving it to run until the SIGKILL a grace
	// period later.
	signal.Reset(syscall.SIGTERM, os.Interrupt)
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "lab helper: want serve, get, post or bulk")
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = helperServe(args[1:])
	case "get", "post":
		err = helperRequest(args[0], args[1:])
	case "bulk":
		err = helperBulk(args[1:])
	case "churn":
		err = helperChurn(args[1:])
	case "quic-serve":
		err = helperQUICServe(args[1:])
	case "quic-bulk":
		err = helperQUICBulk(args[1:])
	case "echo":
		err = helperEcho(args[1:])
	case "ping":
		err = helperPing(args[1:])
	case "blast":
		err = helperBlast(args[1:])
	default:
		if h, ok := helpers[args[0]]; ok {
			err = h(args[1:])
		} else {
			err = fmt.Errorf("unknown helper %q", args[0])
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab helper %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// helpers are the helpers an experiment adds (RegisterHelper).
var helpers = map[string]func(args []string) error{}

// RegisterHelper adds the helper NAME that an experiment runs inside its
// hosts; call it from an init function, so that any binary with the
// experiment linked in (lanes, a test binary) runs it. A duplicate panics.
func RegisterHelper(name string, run func(args []string) error) {
	if _, dup := helpers[name]; dup {
		panic("lab: duplicate helper " + name)
	}
	helpers[name] = run
}

var zeros = make([]byte, 64<<10)

func helperServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lc := net.ListenConfig{Control: CCControl}
	ln, err := lc.Listen(context.Background(), "tcp", *listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
		if rate, _ := strconv.Atoi(r.URL.Query().Get("rate")); rate > 0 {
			if c, ok := r.Context().Value(connKey{}).(syscall.Conn); ok {
				if rc, err := c.SyscallConn(); err == nil {
					_ = pace(rc, rate)
				}
			}
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := int64(len(zeros))
			if n < k {
				k = n
			}
			if _, err := w.Write(zeros[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/sink", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d\n", n)
	})
	fmt.Println("ready")
	srv := &http.Server{Handler: mux, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}}
	return srv.Serve(ln)
}

// connKey is the context key of a served request's connection.
type connKey struct{}

// pace sets SO_MAX_PACING_RATE (bytes/s) on a socket: without the fq
// qdisc TCP then paces itself at that rate.
func pace(c syscall.RawConn, rate int) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, rate) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_MAX_PACING_RATE %d: %w", rate, serr)
	}
	return nil
}

func cpuNow() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func helperRequest(kind string, args []string) error {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	url := fs.String("url", "", "server URL (http://IP:PORT)")
	size := fs.Int64("bytes", 1000, "bytes to transfer")
	timeout := fs.Duration("timeout", 120*time.Second, "give up after")
	appCC := fs.String("app-cc", "", "congestion control the app sets on its socket once connected")
	rate := fs.Int("rate", 0, "get: the server paces the response at this many bytes/s (0: no pacing)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d := &net.Dialer{Control: CCControl}
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true, DialContext: appCCDial(d.DialContext, *appCC, false)}
	cl := &http.Client{Transport: tr, Timeout: *timeout}
	cpu0 := cpuNow()
	start := time.Now()
	var got int64
	var err error
	if kind == "get" {
		var resp *http.Response
		resp, err = cl.Get(fmt.Sprintf("%s/data?bytes=%d&rate=%d", *url, *size, *rate))
		if err == nil {
			got, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	} else {
		var resp *http.Response
		body := io.LimitReader(zeroReader{}, *size)
		req, _ := http.NewRequest(http.MethodPost, *url+"/sink", body)
		req.ContentLength = *size
		resp, err = cl.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got = *size
		}
	}
	res := HelperResult{Seconds: time.Since(start).Seconds(), Bytes: got, CPUNs: int64(cpuNow() - cpu0)}
	if err != nil {
		res.Error = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// BulkHello is the line bulk prints once connected.
type BulkHello struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	// CC is the socket's congestion control after the app set its own
	// (--app-cc; empty without).
	CC string `json:"cc,omitempty"`
}

func helperBulk(args []string) error {
	fs := flag.NewFlagSet("bulk", flag.ContinueOnError)
	url := fs.String("url", "", "server URL (http://IP:PORT)")
	prio := fs.Int("prio", -1, "SO_PRIORITY for the socket (-1: leave)")
	nice := fs.Int("nice", 0, "nice value for this process (19 = the paper's static priority 139)")
	appCC := fs.String("app-cc", "", "congestion control the app sets on its socket once connected")
	rate := fs.Int("rate", 0, "pace the socket at this many bytes/s (SO_MAX_PACING_RATE: the kernel's own pacing; 0: no pacing)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, *nice); err != nil {
			return fmt.Errorf("setpriority: %w", err)
		}
	}
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		serr := CCControl("", "", c)
		if *prio >= 0 {
			_ = c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PRIORITY, *prio) })
		}
		if serr == nil && *rate > 0 {
			serr = pace(c, *rate)
		}
		return serr
	}}
	tr := &http.Transport{DisableCompression: true, DialContext: appCCDial(d.DialContext, *appCC, true)}
	cl := &http.Client{Transport: tr}
	for {
		req, _ := http.NewRequest(http.MethodPost, *url+"/sink", zeroReader{})
		req.ContentLength = -1
		resp, err := cl.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// helperChurn opens a new connection every --every and GETs --bytes over
// it (a browser's or a chat app's connection churn), until killed; each
// request starts on time whether or not the last one finished.
func helperChurn(args []string) error {
	fs := flag.NewFlagSet("churn", flag.ContinueOnError)
	url := fs.String("url", "", "server URL (http://IP:PORT)")
	every := fs.Duration("every", 300*time.Millisecond, "between connections")
	size := fs.Int64("bytes", 1000, "bytes per request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d := &net.Dialer{Control: CCControl}
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true, DialContext: d.DialContext}, Timeout: time.Minute}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for range tick.C {
		go func() {
			resp, err := cl.Get(fmt.Sprintf("%s/data?bytes=%d", *url, *size))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	return nil
}

func helperEcho(args []string) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	listen := fs.String("listen", ":7", "UDP listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", *listen)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	buf := make([]byte, 2048)
	for {
		n, a, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		_, _ = pc.WriteTo(buf[:n], a)
	}
}

func helperPing(args []string) error {
	fs := flag.NewFlagSet("ping", flag.ContinueOnError)
	to := fs.String("to", "", "UDP echo server IP:PORT")
	count := fs.Int("count", 10, "probes")
	interval := fs.Duration("interval", 200*time.Millisecond, "between probes")
	size := fs.Int("size", 64, "payload bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := net.Dial("udp", *to)
	if err != nil {
		return err
	}
	buf := make([]byte, 2048)
	out := []float64{}
	for i := 0; i < *count; i++ {
		p := make([]byte, *size)
		copy(p, strconv.Itoa(i))
		start := time.Now()
		if _, err := c.Write(p); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(buf); err == nil {
			out = append(out, float64(time.Since(start).Microseconds())/1000)
		}
		time.Sleep(*interval)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return nil
}

// CCControl sets the congestion control named by LANES_LAB_CC on a
// socket: a net.Dialer's or net.ListenConfig's Control for every TCP
// socket a helper opens (a namespace may default to another: topo's
// NewNode).
func CCControl(_, _ string, c syscall.RawConn) error {
	cc := os.Getenv("LANES_LAB_CC")
	if cc == "" {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) })
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("TCP_CONGESTION %s: %w", cc, serr)
	}
	return nil
}

func helperBlast(args []string) error {
	fs := flag.NewFlagSet("blast", flag.ContinueOnError)
	to := fs.String("to", "", "UDP IP:PORT")
	dur := fs.Duration("for", 3*time.Second, "how long")
	size := fs.Int("size", 1472, "payload bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := net.Dial("udp", *to)
	if err != nil {
		return err
	}
	p := make([]byte, *size)
	n := 0
	end := time.Now().Add(*dur)
	for time.Now().Before(end) {
		for i := 0; i < 64; i++ {
			if _, err := c.Write(p); err == nil {
				n++
			}
		}
	}
	fmt.Printf("{\"sent\":%d}\n", n)
	return nil
}
