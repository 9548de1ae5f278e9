// Package netnscookie reads the network namespace's cookie where
// SO_NETNS_COOKIE (5.14) is missing, through a cgroup/sock_create program
// (netnscookie.c, bpf_get_netns_cookie: 5.7+). The daemon names its
// instance after the cookie, which the kernel never hands to another
// namespace while it runs, unlike the namespace's inode.
package netnscookie

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -no-global-types Netnscookie netnscookie.c -- -nostdinc -I../include -O2 -g -Wall -Werror

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// probeProto is the raw IPv6 socket's protocol the program waits for
// (RFC 3692: for experimentation; nothing else creates such a socket).
const probeProto = 253

// Read returns the cookie of the calling thread's network namespace. The
// program is attached to this process's cgroup (under cgroup2Root, the
// unified hierarchy's mount) for the one socket it creates, then removed.
func Read(cgroup2Root string) (uint64, error) {
	cg, err := ownCgroup(cgroup2Root)
	if err != nil {
		return 0, err
	}
	if err := rlimit.RemoveMemlock(); err != nil { // maps are charged to it before 5.11
		return 0, fmt.Errorf("netns cookie: %w", err)
	}
	var objs NetnscookieObjects
	if err := LoadNetnscookieObjects(&objs, nil); err != nil {
		return 0, fmt.Errorf("netns cookie: load: %w", err)
	}
	defer objs.Close()
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupInetSockCreate, Program: objs.RecordNetnsCookie})
	if err != nil {
		return 0, fmt.Errorf("netns cookie: attach to %s: %w", cg, err)
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, probeProto)
	l.Close()
	if err != nil {
		return 0, fmt.Errorf("netns cookie: probe socket: %w", err)
	}
	unix.Close(fd)
	var cookie uint64
	if err := objs.NetnsCookie.Lookup(uint32(0), &cookie); err != nil {
		return 0, fmt.Errorf("netns cookie: %w", err)
	}
	if cookie == 0 {
		return 0, errors.New("netns cookie: the program did not run for the probe socket")
	}
	return cookie, nil
}

// ownCgroup is this process's cgroup v2 directory under root.
func ownCgroup(root string) (string, error) {
	if root == "" {
		return "", errors.New("netns cookie: no cgroup v2 mount")
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "0::"); ok {
			return filepath.Join(root, rest), nil
		}
	}
	return "", errors.New("netns cookie: no cgroup v2 entry in /proc/self/cgroup")
}
