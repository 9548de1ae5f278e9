// Package tcpiter holds the BPF TCP socket iterator of lanes' monitor
// (tcpiter.c) and its loader: one fixed-size record of raw struct tcp_sock
// fields per socket of a network namespace, read from the iterator's stream
// (internal/tcpmon turns them into flows).
package tcpiter

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type tcp_rec Tcpiter tcpiter.c -- -nostdinc -I../include -O2 -g -Wall -Werror
