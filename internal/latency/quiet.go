// quiet.go: the process-wide settings a measurement needs beside its hot
// loop — a Go runtime that sends no preemption signals (ExecQuiet) and the
// power-management latency request cyclictest makes (HoldPMLatency).
package latency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// quietGODEBUG turns off sysmon's asynchronous preemption: a measuring
// thread that never reaches a safe point would otherwise get a SIGURG for
// every 10 ms it holds its P.
const quietGODEBUG = "asyncpreemptoff=1"

// Quiet reports whether this process's runtime was started quiet.
func Quiet() bool {
	return strings.Contains(os.Getenv("GODEBUG"), quietGODEBUG)
}

// ExecQuiet re-executes the running program in place (same pid, arguments
// and open files) with GODEBUG=asyncpreemptoff=1 and GOGC=off, unless it
// already runs that way. It returns only when no re-exec is needed or the
// exec failed; the caller may then measure anyway (preemption signals only
// interrupt sleeps, which restart).
func ExecQuiet() error {
	if Quiet() {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("re-exec quiet: %w", err)
	}
	env := os.Environ()
	godebug := quietGODEBUG
	if old := os.Getenv("GODEBUG"); old != "" {
		godebug = old + "," + quietGODEBUG
	}
	env = setEnv(setEnv(env, "GODEBUG", godebug), "GOGC", "off")
	return fmt.Errorf("re-exec quiet: %w", syscall.Exec(exe, os.Args, env))
}

func setEnv(env []string, k, v string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

// pmQoSPath is the CPU wake-up latency request of the PM QoS framework.
const pmQoSPath = "/dev/cpu_dma_latency"

// HoldPMLatency asks the kernel to keep every CPU's wake-up latency at or
// below us microseconds (0: no idle state deeper than polling), as
// cyclictest does by default (--latency), for as long as the returned
// file stays open. A negative us leaves the setting alone (nil file). On
// a system without the device it returns an error the caller may report.
func HoldPMLatency(us int) (*os.File, error) {
	if us < 0 {
		return nil, nil
	}
	f, err := os.OpenFile(pmQoSPath, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("pm qos: %w", err)
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(int32(us)))
	if _, err := f.Write(b[:]); err != nil {
		return nil, errors.Join(fmt.Errorf("pm qos: %w", err), f.Close())
	}
	return f, nil
}
