// execlane.go: the exe: rules' lanes decided at exec in the kernel
// (internal/bpf/execlane): a process an exe: rule names gets its lane on
// every socket it creates from its exec on, before the task engine's move
// (which follows the exec event) reaches it.
package datapath

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/execlane"
	"github.com/lanes-net/lanes/internal/lane"
)

// loadExecLane loads the programs; a failure turns off CapExecLane only.
func (h *Host) loadExecLane(netnsCookie uint64, netnsIno uint32) {
	if _, off := h.off[CapExecLane]; off {
		return
	}
	if netnsCookie == 0 || netnsIno == 0 {
		h.disable(CapExecLane, errors.New("no network namespace cookie or inode on this kernel: exe: rules act when the task engine moves the process"))
		return
	}
	l, err := execlane.Load(netnsCookie, netnsIno, h.cls.LanesCookie, h.cfg.CgroupRoot)
	if err != nil {
		h.disable(CapExecLane, fmt.Errorf("exe: rules act when the task engine moves the process (after its exec event): %w", err))
		return
	}
	h.exec = l
}

// SetExeLanes sets the executables (absolute paths) whose processes get a
// lane at exec; a path that does not exist is skipped (its rule still
// acts through the task engine).
func (p *CgroupPrograms) SetExeLanes(exes map[string]lane.Lane) error {
	return p.guard.use(func() error {
		if p.exec == nil {
			return nil
		}
		want := map[execlane.Key]uint32{}
		for path, l := range exes {
			fi, err := os.Stat(path)
			if err != nil {
				continue
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				continue
			}
			dev := uint64(st.Dev)
			want[execlane.Key{Dev: execlane.KernelDev(unix.Major(dev), unix.Minor(dev)), Ino: st.Ino}] = uint32(l)
		}
		return p.exec.Set(want)
	})
}
