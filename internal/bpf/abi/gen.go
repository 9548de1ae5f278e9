// Package abi is the Go side of the lanes BPF ABI: the lane numbers, match
// kinds, sock_ops counters and shared map structs of
// internal/bpf/include/lanes_abi.h, generated from that header by bpf2go
// (abi_bpfel.go). The programs' own packages and the datapath use these
// instead of repeating the numbers; abi_test.go checks the hand-written
// name tables against the header.
package abi

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type lane -type lane_class -type match_kind -type ops_counter -type flow_key -type dst_key -type counter Abi abi.c -- -nostdinc -I../include -O2 -g -Wall -Werror
