// Package ledbat holds the lanes LEDBAT++ congestion control (ledbat.c, the
// arithmetic in ledbat_core.h): a BPF struct_ops scavenger for the
// background lane, registered under a name of the loader's choosing
// (internal/bpf/structops: a bpf_link, or a map update before 6.4), with
// its queuing-delay target set before load. ledbat_step.c runs the same
// arithmetic as a socket filter program for the tests, which compare it with the
// Go reference model (internal/ledbat).
package ledbat

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -no-global-types Ledbat ledbat.c -- -I../include -I/usr/include/x86_64-linux-gnu -O2 -g -Wall
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -type ledbat_step Step ledbat_step.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall
