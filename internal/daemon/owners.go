// owners.go: answers "who owns this socket / process / group membership" from
// /proc, for the API's authorization (anyone may demote their own flows and
// processes to background, and no one else's).
package daemon

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/lanes-net/lanes/internal/api"
)

// procOwners implements api.Owners for the daemon's own network namespace.
type procOwners struct {
	proc string // "/proc" (tests may point elsewhere)
}

// FlowOwner finds the local socket with the flow's 3-tuple in
// /proc/net/{tcp,tcp6,udp,udp6} and returns its uid.
func (o procOwners) FlowOwner(f api.Flow) (uint32, error) {
	dst, err := netip.ParseAddr(f.Dst)
	if err != nil {
		return 0, err
	}
	proto := f.Proto
	if proto == "" {
		proto = "tcp"
	}
	for _, file := range []string{proto, proto + "6"} {
		uid, ok, err := findSocket(o.proc+"/net/"+file, dst, f.DPort, f.SPort)
		if err != nil && !os.IsNotExist(err) {
			return 0, err
		}
		if ok {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no local %s socket %s", proto, f)
}

// findSocket scans one /proc/net table. Columns: sl local rem st ... uid.
func findSocket(path string, dst netip.Addr, dport, sport uint16) (uint32, bool, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		la, lp, err1 := parseProcAddr(fields[1])
		ra, rp, err2 := parseProcAddr(fields[2])
		if err1 != nil || err2 != nil || lp != sport || rp != dport || ra.Unmap() != dst.Unmap() {
			continue
		}
		_ = la
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			continue
		}
		return uint32(uid), true, nil
	}
	return 0, false, sc.Err()
}

// parseProcAddr decodes "0100007F:1F90" (IPv4) or the 32-hex-digit IPv6 form;
// addresses are in host byte order per 32-bit word.
func parseProcAddr(s string) (netip.Addr, uint16, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is little-endian
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr, uint16(port), nil
}

// ProcessOwner returns a process's real uid from /proc/PID/status.
func (o procOwners) ProcessOwner(pid int) (uint32, error) {
	ids, err := statusIDs(fmt.Sprintf("%s/%d/status", o.proc, pid), "Uid:")
	if err != nil || len(ids) == 0 {
		return 0, fmt.Errorf("process %d: %v", pid, err)
	}
	return ids[0], nil
}

// InGroup says whether the caller's gid or supplementary groups include group.
func (o procOwners) InGroup(c api.Cred, group string) bool {
	g, err := user.LookupGroup(group)
	if err != nil {
		return false
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return false
	}
	if c.GID == uint32(gid) {
		return true
	}
	groups, err := statusIDs(fmt.Sprintf("%s/%d/status", o.proc, c.PID), "Groups:")
	if err != nil {
		return false
	}
	for _, x := range groups {
		if x == uint32(gid) {
			return true
		}
	}
	return false
}

func statusIDs(path, key string) ([]uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			var out []uint32
			for _, f := range strings.Fields(rest) {
				v, err := strconv.ParseUint(f, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("%s: bad %s %q", path, key, f)
				}
				out = append(out, uint32(v))
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: no %s line", path, key)
}
