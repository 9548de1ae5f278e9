// Package capcc holds the lanes BPF congestion control (capcc.c): the
// kernel's CUBIC plus an enforced cwnd clamp, registered under a name of
// the loader's choosing (internal/bpf/structops: a struct_ops bpf_link, or
// a map update before Linux 6.4). The sock_ops program
// switches capped CUBIC sockets to it so that a new cwnd cap reaches an
// existing connection on its next ACK, cwnd-limited or not.
package capcc

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -no-global-types Capcc capcc.c -- -nostdinc -I../include -O2 -g -Wall -Werror
