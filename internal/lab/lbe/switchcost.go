// switchcost.go: `lanes lab run lbe-switch`, the LW-LBE paper's table 1 on
// this machine: what it costs to hand a packet to the low-priority path.
//
//   - task -> task switch: two threads pinned to one CPU bounce a byte over
//     two pipes (write, block in read, switch); one round trip is two
//     switches (including the pipe system calls, as lmbench's lat_ctx).
//   - in-kernel classification: lanes' cls_bpf classifier run on one packet
//     through BPF_PROG_TEST_RUN with repeat (mean ns per run, measured by
//     the kernel), beside a pass-through program on the same hook; this is
//     what lanes adds per packet instead of waking a task.
//
// The paper measured cycles on a 528 MHz ARM11: task<->task 5,484 cycles
// (10.4 us), task<->softirq 2,177 cycles (4.1 us).
package lbe

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lane"
)

// PipeSwitch measures one task-to-task switch in ns (round trips / 2).
func PipeSwitch(rounds int) (float64, error) {
	var ab, ba [2]int
	if err := unix.Pipe(ab[:]); err != nil {
		return 0, err
	}
	if err := unix.Pipe(ba[:]); err != nil {
		return 0, err
	}
	defer func() {
		for _, fd := range []int{ab[0], ab[1], ba[0], ba[1]} {
			unix.Close(fd)
		}
	}()
	pin := func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(0)
		_ = unix.SchedSetaffinity(0, &set)
	}
	done := make(chan error, 1)
	go func() {
		pin()
		defer runtime.UnlockOSThread()
		b := make([]byte, 1)
		for i := 0; i < rounds; i++ {
			if _, err := unix.Read(ab[0], b); err != nil {
				done <- err
				return
			}
			if _, err := unix.Write(ba[1], b); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	pin()
	defer runtime.UnlockOSThread()
	b := []byte{1}
	start := time.Now()
	for i := 0; i < rounds; i++ {
		if _, err := unix.Write(ab[1], b); err != nil {
			return 0, err
		}
		if _, err := unix.Read(ba[0], b); err != nil {
			return 0, err
		}
	}
	el := time.Since(start)
	if err := <-done; err != nil {
		return 0, err
	}
	return float64(el.Nanoseconds()) / float64(2*rounds), nil
}

// ClassifierCost measures lanes' classifier per packet: a packet matching
// nothing (its longest path), one hitting the 3-tuple map, and a
// pass-through program, in ns.
func ClassifierCost(repeat int) (miss, hit, pass float64, err error) {
	objs, err := classifier.Load(classifier.Config{})
	if err != nil {
		return 0, 0, 0, err
	}
	defer objs.Close()
	dst := netip.MustParseAddr("10.9.0.2")
	if err := objs.PutFlow(classifier.FlowKey(netip.Addr{}, dst, 443, 5000, 6), lane.Background); err != nil {
		return 0, 0, 0, err
	}
	frame := func(sport uint16) []byte {
		b := make([]byte, 14+20+20+64)
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:]
		ip[0], ip[8], ip[9] = 0x45, 64, 6
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		copy(ip[12:], []byte{10, 9, 0, 1})
		copy(ip[16:], dst.AsSlice())
		binary.BigEndian.PutUint16(ip[20:], sport)
		binary.BigEndian.PutUint16(ip[22:], 443)
		ip[32] = 5 << 4
		return b
	}
	run := func(p *ebpf.Program, data []byte) (float64, error) {
		_, per, err := p.Benchmark(data, repeat, nil)
		return float64(per.Nanoseconds()), err
	}
	if miss, err = run(objs.LanesClassify, frame(5001)); err != nil {
		return
	}
	if hit, err = run(objs.LanesClassify, frame(5000)); err != nil {
		return
	}
	pass, err = run(objs.LanesPassthrough, frame(5001))
	return
}

func init() {
	testbed.Register(testbed.Experiment{Name: "lbe-switch", Summary: "LW-LBE table 1: task switch vs lanes' in-kernel classification, ns",
		Quick: "20,000 switches, 100,000 classifications",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			rounds := fs.Int("rounds", 200000, "pipe ping-pong round trips")
			repeat := fs.Int("repeat", 1000000, "BPF_PROG_TEST_RUN repetitions")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				r := &testbed.Result{Experiment: "lbe-switch", Started: time.Now(), Params: map[string]any{"rounds": *rounds, "repeat": *repeat}}
				if env.Quick {
					*rounds, *repeat = 20000, 100000
				}
				sw, err := PipeSwitch(*rounds)
				if err != nil {
					return nil, fmt.Errorf("pipe ping-pong: %w", err)
				}
				t := testbed.Table{Title: "Per-switch cost (paper table 1)", Columns: []string{"path", "here, ns", "paper (528 MHz ARM11)"}}
				t.Rows = append(t.Rows, []string{"task -> task switch (pipe ping-pong, one CPU)", fmt.Sprintf("%.0f", sw), "5,484 cycles = 10,386 ns"})
				miss, hit, pass, err := ClassifierCost(*repeat)
				if err != nil {
					r.Notes = append(r.Notes, "classifier not measured: "+err.Error())
				} else {
					t.Rows = append(t.Rows,
						[]string{"lanes classifier, packet in no lane (longest path)", fmt.Sprintf("%.0f", miss), "task <-> softirq: 2,177 cycles = 4,123 ns"},
						[]string{"lanes classifier, 3-tuple hit", fmt.Sprintf("%.0f", hit), ""},
						[]string{"pass-through cls_bpf program (hook cost)", fmt.Sprintf("%.0f", pass), ""})
				}
				r.Tables = []testbed.Table{t}
				r.Data = map[string]any{"switch_ns": sw, "classify_miss_ns": miss, "classify_hit_ns": hit, "passthrough_ns": pass}
				r.Environment = testbed.CaptureEnvironment(nil, env, nil)
				r.Notes = append(r.Notes, "the machine is shared and virtualised: the switch cost includes two pipe system calls and a wake-up per switch, as lmbench lat_ctx")
				r.Duration = time.Since(r.Started)
				return r, nil
			}
		}})
}
