// quiet.go: the process-wide setting a measurement needs beside its hot
// loop — a Go runtime that sends no preemption signals (ExecQuiet). The
// power-management latency request cyclictest makes is internal/pmqos.
package latency

import (
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
