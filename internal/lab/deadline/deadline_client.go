// deadline_client.go: `lanes lab helper rtclient`, the daemon-path
// client of experiment deadline in a process of its own, as a real
// deployment has it (the lab's other clients share the lane's process).
// It sends one periodic flow through the lane's socket from a SCHED_FIFO
// thread and prints its records (sequence, send call time, refusal) as
// JSON lines of up to 1,000 records after the run.
package deadline

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/rtclient"
)

// rtClientRecord is one datagram as the helper reports it.
type rtClientRecord struct {
	Seq     uint32 `json:"s"`
	Send    int64  `json:"t"`
	Refused string `json:"r,omitempty"`
}

func init() { testbed.RegisterHelper("rtclient", helperRTClient) }

func helperRTClient(args []string) error {
	fs := flag.NewFlagSet("rtclient", flag.ContinueOnError)
	sock := fs.String("socket", "", "the lane's socket")
	dst := fs.String("dst", "", "destination ADDR:PORT")
	flow := fs.Uint("flow", 5, "flow id")
	period := fs.Duration("period", time.Millisecond, "send period")
	deadline := fs.Duration("deadline", 5*time.Millisecond, "deadline after the send call")
	size := fs.Int("size", 200, "payload bytes")
	dur := fs.Duration("for", time.Second, "run time")
	prio := fs.Int("prio", 0, "SCHED_FIFO priority of the sending thread (0: normal)")
	cpu := fs.Int("cpu", -1, "pin every thread of this process to this CPU (-1: not pinned)")
	own := fs.Bool("own-socket", false, "send from a UDP socket of this process's own, attached to the lane")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpu >= 0 {
		if err := pinProcess(*cpu); err != nil {
			return err
		}
	}
	to, err := netip.ParseAddrPort(*dst)
	if err != nil {
		return err
	}
	debug.SetGCPercent(-1) // as the lab process during a run
	f := dlFlow{ID: uint32(*flow), Name: "P", Deadline: *deadline, Burst: 1, Period: *period, Size: *size}
	recs, err := runFlows(context.Background(), []dlFlow{f}, *dur, *prio, func() (dlSender, error) {
		c, err := rtclient.Dial(*sock)
		if err != nil {
			return nil, err
		}
		ls := &laneSender{c: c, dst: to}
		if *own {
			if err := ls.attachOwn(func(f func() error) error { return f() }); err != nil {
				ls.close()
				return nil, err
			}
		}
		return ls, nil
	})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for i := 0; i < len(recs); i += 1000 {
		var out []rtClientRecord
		for _, r := range recs[i:min(i+1000, len(recs))] {
			out = append(out, rtClientRecord{Seq: r.Seq, Send: r.Send, Refused: r.Refused})
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}

// pinProcess sets the CPU affinity of every thread the process has now;
// threads created later inherit it from their pinned creators.
func pinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// runProcClient runs flow f through the lane at sock from `lanes lab
// helper rtclient` (pinned to cpu unless it is -1; from a socket of its
// own with own) and returns its records.
func (b *dlBed) runProcClient(ctx context.Context, sock string, dst netip.AddrPort, f dlFlow, dur time.Duration, prio, cpu int, own bool) ([]dlRecord, error) {
	proc, err := b.snd.Start("rtclient", "--socket", sock, "--dst", dst.String(), "--flow", strconv.Itoa(int(f.ID)),
		"--period", f.Period.String(), "--deadline", f.Deadline.String(), "--size", strconv.Itoa(f.Size),
		"--for", dur.String(), "--prio", strconv.Itoa(prio), "--cpu", strconv.Itoa(cpu), "--own-socket="+strconv.FormatBool(own))
	if err != nil {
		return nil, err
	}
	defer proc.Kill() // if still running: an error or ctx ended the wait
	var recs []dlRecord
	for {
		line, err := proc.Line(ctx, dur+30*time.Second)
		if err != nil {
			select {
			case <-proc.Done():
			default:
				return nil, fmt.Errorf("rtclient helper: %w", err)
			}
			if perr := proc.Err(); perr != nil {
				return nil, fmt.Errorf("rtclient helper: %w", perr)
			}
			return recs, nil // end of output
		}
		var part []rtClientRecord
		if err := json.Unmarshal([]byte(line), &part); err != nil {
			return nil, fmt.Errorf("rtclient helper output: %w", err)
		}
		for _, r := range part {
			recs = append(recs, dlRecord{Flow: f.ID, Seq: r.Seq, Send: r.Send, Deadline: r.Send + int64(f.Deadline), Refused: r.Refused})
		}
	}
}
