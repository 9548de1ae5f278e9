// wakeup_bench_test.go: what waking a granted client's reader costs
// through the runtime's system call path, with and without a garbage
// collector at work. The reader is the lane's own read (blockingRecv) at
// SCHED_FIFO 21, the client a
// process of its own at SCHED_FIFO 20 writing a timestamp every 1 ms and
// waiting for the reply, as rtclient does; PM QoS 0 is held (as cyclictest
// does). Figures: one-way wake-up p50/p99 (client's send call to the
// reader's return), the voluntary context switches of the process's other
// threads per request (sysmon, idle Ms: how often the runtime wakes a
// thread for the reader), and with "gc" a goroutine allocating 80 MB/s beside
// it: collections and the p99/max of their stop-the-world stopping time
// (runtime/metrics /sched/pauses/stopping/gc). Run:
//
//	go test -run '^$' -bench ReaderWakeup -benchtime 5000x ./internal/rtlane/
package rtlane

import (
	"encoding/binary"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/pmqos"
)

func BenchmarkReaderWakeup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (SCHED_FIFO)")
	}
	pm, err := pmqos.Hold(0)
	if err != nil {
		b.Logf("PM QoS not held: %v", err)
	}
	defer pm.Close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), wantProcs(1))))
	for _, gc := range []bool{false, true} {
		name := "runtime"
		if gc {
			name += "/gc"
		}
		b.Run(name, func(b *testing.B) { benchWakeup(b, gc) })
	}
}

var gcSink [][]byte

func benchWakeup(b *testing.B, gc bool) {
	cl, sv := seqpacketPair(b)
	if gc {
		defer allocate()()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWakeupClientHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LANES_WAKEUP_CLIENT="+strconv.Itoa(b.N))
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(cl), "client")}
	cmd.Stderr = os.Stderr
	before := stwStopping()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r := &wakeupReader{lat: make([]int64, 0, b.N), done: make(chan struct{})}
	b.ResetTimer()
	go r.serve(sv)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("client: %v", err)
	}
	_ = unix.Shutdown(sv, unix.SHUT_RDWR)
	<-r.done
	b.StopTimer()
	after := stwStopping()
	lat := r.lat
	if len(lat) == 0 {
		b.Fatal("no requests read")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
	b.ReportMetric(float64(r.others)/float64(len(lat)), "other-switches/op")
	if gc {
		n, p99, mx := stwDelta(before, after)
		b.ReportMetric(float64(n), "stw")
		b.ReportMetric(p99*1e6, "stw-stop-p99-µs")
		b.ReportMetric(mx*1e6, "stw-stop-max-µs")
	}
}

// allocate allocates ~80 MB/s in 1 KiB objects (the garbage collector's
// work during the benchmark) until the returned stop is called.
func allocate() (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				gcSink = nil
				return
			default:
			}
			for i := 0; i < 80; i++ {
				gcSink = append(gcSink, make([]byte, 1024))
			}
			if len(gcSink) > 20000 {
				gcSink = nil
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { close(done) }
}

// wakeupReader is the benchmark's reader: the lane's own read, on a
// locked SCHED_FIFO thread, answering each request and recording its
// wake-up latency.
type wakeupReader struct {
	lat    []int64 // ns from the client's send to the read's return
	others int64   // the other threads' voluntary switches while it served
	done   chan struct{}
}

func (r *wakeupReader) serve(sv int) {
	defer close(r.done)
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 21}
	_ = unix.SchedSetAttr(0, &a, 0)
	all0, own0 := switches(unix.RUSAGE_SELF), switches(unix.RUSAGE_THREAD)
	buf, out := make([]byte, 64), make([]byte, 32)
	for {
		n, _, err := blockingRecv(sv, buf)
		for err == unix.EINTR {
			n, _, err = blockingRecv(sv, buf)
		}
		now := Monotonic()
		if err != nil || n < 8 {
			r.others = switches(unix.RUSAGE_SELF) - all0 - (switches(unix.RUSAGE_THREAD) - own0)
			return
		}
		r.lat = append(r.lat, now-int64(binary.NativeEndian.Uint64(buf)))
		_ = writeAll(sv, out, 0)
	}
}

// switches is the voluntary context switches of this process's threads,
// the ended ones included (who: RUSAGE_SELF or RUSAGE_THREAD).
func switches(who int) int64 {
	var ru unix.Rusage
	_ = unix.Getrusage(who, &ru)
	return ru.Nvcsw
}

// stwStopping reads the histogram of stop-the-world stopping times.
func stwStopping() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/pauses/stopping/gc:seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64Histogram()
}

// stwDelta is the count, p99 and max (bucket upper bounds, s) of the
// stops between two readings.
func stwDelta(a, b *metrics.Float64Histogram) (n uint64, p99, mx float64) {
	d := make([]uint64, len(b.Counts))
	for i := range d {
		d[i] = b.Counts[i] - a.Counts[i]
		n += d[i]
	}
	var acc uint64
	for i, c := range d {
		acc += c
		if c > 0 {
			mx = b.Buckets[i+1]
		}
		if p99 == 0 && n > 0 && acc*100 >= n*99 {
			p99 = b.Buckets[i+1]
		}
	}
	return n, p99, mx
}

// TestWakeupClientHelper is the client process of BenchmarkReaderWakeup:
// fd 3 is its end of the pair.
func TestWakeupClientHelper(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LANES_WAKEUP_CLIENT"))
	if n == 0 {
		t.Skip("only run by BenchmarkReaderWakeup")
	}
	runtime.LockOSThread()
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 20}
	_ = unix.SchedSetAttr(0, &a, 0)
	const fd = 3
	buf, in := make([]byte, 40), make([]byte, 64)
	next := Monotonic() + 2e6
	for i := 0; i < n; i++ {
		ts := unix.NsecToTimespec(next)
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
		}
		binary.NativeEndian.PutUint64(buf, uint64(Monotonic()))
		if err := writeAll(fd, buf, 0); err != nil {
			t.Fatal(err)
		}
		for {
			if _, _, err := unix.Recvfrom(fd, in, 0); err != unix.EINTR {
				break
			}
		}
		next += 1e6
	}
}

// seqpacketPair is a connected unix SOCK_SEQPACKET pair, closed at the end.
func seqpacketPair(t testing.TB) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}
