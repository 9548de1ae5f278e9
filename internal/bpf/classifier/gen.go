// Package classifier holds the lanes egress classifier (classifier.c), a
// cls_bpf direct-action program that sets skb->tc_classid to the HTB class
// of the packet's lane, and its generated Go bindings. The datapath package
// loads it, fills its maps and attaches it to the root HTB qdisc.
package classifier

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel Classifier classifier.c -- -nostdinc -I../include -O2 -g -Wall -Werror
