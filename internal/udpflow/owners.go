// owners.go: the process that holds each UDP socket, by inode, from the
// /proc/PID/fd links (as `ss -p`); read by the clients that show the
// flows, with their own permissions (root sees every process).
package udpflow

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FillOwners sets PID and Comm of the flows whose socket inode a process
// of procRoot ("/proc") holds; the first process found wins.
func FillOwners(flows []Flow, procRoot string) {
	want := map[uint32][]int{}
	for i := range flows {
		if flows[i].Inode != 0 {
			want[flows[i].Inode] = append(want[flows[i].Inode], i)
		}
	}
	if len(want) == 0 {
		return
	}
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(procRoot, e.Name(), "fd"))
		if err != nil {
			continue
		}
		var comm string
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join(procRoot, e.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(l[len("socket:["):], "]"), 10, 32)
			if err != nil {
				continue
			}
			for _, i := range want[uint32(ino)] {
				if flows[i].PID != 0 {
					continue
				}
				if comm == "" {
					b, _ := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
					comm = strings.TrimSpace(string(b))
				}
				flows[i].PID, flows[i].Comm = pid, comm
			}
		}
	}
}

// MarkDaemon marks the flows of sockets the calling process holds (the
// daemon's own: its probes, the realtime lane's, coop's announcements),
// which people's views leave out.
func MarkDaemon(flows []Flow) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	own := map[uint32]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if !strings.HasPrefix(l, "socket:[") || err != nil {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(l[len("socket:["):], "]"), 10, 32); err == nil {
			own[uint32(ino)] = true
		}
	}
	for i := range flows {
		flows[i].Daemon = flows[i].Inode != 0 && own[flows[i].Inode]
	}
}
