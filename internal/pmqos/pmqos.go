// pmqos.go: the CPU wake-up latency request of the kernel's PM QoS
// framework (/dev/cpu_dma_latency). While a request is held, cpuidle keeps
// every CPU out of idle states whose exit latency is above it: with 0, an
// idle CPU polls instead of halting, and a woken real-time thread starts in
// microseconds instead of waiting for the CPU (or, in a VM, the vCPU) to
// come out of a halt. cyclictest holds 0 by default while it measures; the
// latency tool and the realtime lane hold it on request. It costs power:
// idle CPUs stay busy.
package pmqos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// Path is the request's device. The kernel applies the lowest value any
// open file holds, and drops a file's request when it is closed (also
// when its process dies).
const Path = "/dev/cpu_dma_latency"

// Request is one held request; Close ends it.
type Request struct{ f *os.File }

// Hold asks the kernel to keep every CPU's wake-up latency at or below us
// microseconds for as long as the request stays open. A negative us asks
// nothing (nil request, nil error). Without the device (no PM QoS, or a
// sandbox without it) the error says so.
func Hold(us int) (*Request, error) {
	if us < 0 {
		return nil, nil
	}
	f, err := os.OpenFile(Path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("pm qos: %w", err)
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(int32(us)))
	if _, err := f.Write(b[:]); err != nil {
		return nil, errors.Join(fmt.Errorf("pm qos: %w", err), f.Close())
	}
	return &Request{f: f}, nil
}

// Close ends the request; nil-safe.
func (r *Request) Close() error {
	if r == nil {
		return nil
	}
	return r.f.Close()
}

// Current is the wake-up latency (µs) the kernel applies now: the lowest
// request held by anyone, or the kernel's default (2,000 s) if none.
func Current() (int, error) {
	b, err := os.ReadFile(Path)
	if err != nil {
		return 0, fmt.Errorf("pm qos: %w", err)
	}
	if len(b) != 4 {
		return 0, fmt.Errorf("pm qos: %s: read %d bytes, want 4", Path, len(b))
	}
	return int(int32(binary.NativeEndian.Uint32(b))), nil
}
