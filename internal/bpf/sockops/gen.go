// Package sockops holds the lanes sock_ops program (sockops.c): it resolves
// each TCP socket's lane at connect/accept, stores it by socket cookie for
// the classifier, sets TCP_NOTSENT_LOWAT on background sockets and applies
// the cooperative controller's cwnd caps, switching capped CUBIC sockets to
// the lanes congestion control (internal/bpf/capcc). The datapath package
// loads it with the classifier's maps and attaches it at the cgroup v2 root.
package sockops

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type sk_state -type owd_dir Sockops sockops.c -- -nostdinc -I../include -O2 -g -Wall -Werror
