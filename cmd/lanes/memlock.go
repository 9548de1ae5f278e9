// memlock.go: lift RLIMIT_MEMLOCK for BPF before any command runs. Kernels
// before 5.11 charge BPF maps and programs to the locked-memory limit, whose
// default (64 KiB on many systems and Android devices) is too small for the
// classifier's maps: on Debian 11's 5.10 `lanes doctor` failed the datapath
// with "map create: operation not permitted". From 5.11 the kernel charges
// the memory cgroup instead and this changes nothing.
package main

import "github.com/cilium/ebpf/rlimit"

// liftMemlock raises the limit where the kernel needs it; without the
// privilege to do so BPF loads fail with their own error later.
func liftMemlock() { _ = rlimit.RemoveMemlock() }
