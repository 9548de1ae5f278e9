// Package edfqdisc holds the realtime lane's EDF with the paper's admission
// test in the kernel: the arithmetic in edf_core.h; edfqdisc.c, lanes'
// egress scheduler as a BPF qdisc (Linux 6.16+) built on it, loaded and
// installed by edfqdisc.go; and edf_step.c, which runs the arithmetic as a
// socket filter through BPF_PROG_TEST_RUN so the tests compare it with
// internal/edf's reference decision by decision.
package edfqdisc

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type edf_step Step edf_step.c -- -nostdinc -I../include -O2 -g -Wall -Werror
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -no-global-types -type edfq_config -type edfq_stats -type edfq_late Edfq edfqdisc.c -- -nostdinc -I../include -O2 -g -Wall -Werror
