// first.go: the first walk's records in mapped memory (Config.FirstSlots,
// first_recs in tcpiter.c). The kernel writes each record of the tracked
// mode's first walk into the next slot of an array map this process has
// mapped, and sets the count of slots written after each; the walk is then
// one read(2) that returns nothing (records beyond the slots excepted,
// which come through the stream), and the records reach the caller
// without a copy to user space or a page fault on the walk's core
// (ReadFirst). FreeFirst gives the memory back after the first walk.
package tcpiter

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mapFirst maps the tracker's first-walk slots (first_recs; nothing if
// it has none), every page at once (MAP_POPULATE).
func (t *Tracker) mapFirst() error {
	m := t.objs.FirstRecs
	if m.MaxEntries() < 2 {
		return nil
	}
	if int(m.ValueSize()) != RecSize || RecSize%8 != 0 {
		return fmt.Errorf("tcp tracker first-walk slots: %d-byte values, want %d", m.ValueSize(), RecSize)
	}
	mem, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries())*RecSize, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("map tcp tracker first-walk slots: %w", err)
	}
	t.firstMem = mem
	return nil
}

// resetFirst sets the slots' count back to 0 if an earlier first walk
// left records there.
func (t *Tracker) resetFirst() error {
	if t.firstMem == nil || firstCount(t.firstMem) == 0 {
		return nil
	}
	if err := t.objs.FirstRecs.Update(uint32(0), make([]byte, RecSize), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reset tcp tracker first-walk slots: %w", err)
	}
	return nil
}

// firstCount is how many slots the kernel has written (slot 0's first 8
// bytes, set after each record's stores).
func firstCount(mem []byte) int {
	n := atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[0])))
	return int(min(n, uint64(len(mem)/RecSize-1)))
}

// ReadFirst starts reading a walk of OpenFirst: as ReadAhead, and where
// the tracker has first-walk slots, Each also takes the records the kernel
// writes there, as it writes them (those beyond them come through r).
func (t *Tracker) ReadFirst(r io.Reader) (*Ahead, error) {
	return readAhead(r, t.firstMem)
}

// FreeFirst unloads the first walk's program and frees its slots: call
// it once the first walk is read (OpenFirst fails from then on).
func (t *Tracker) FreeFirst() error {
	var errs []error
	if t.firstMem != nil {
		errs = append(errs, unix.Munmap(t.firstMem))
		t.firstMem = nil
	}
	if t.first != nil {
		errs = append(errs, t.first.Close())
		t.first = nil
	}
	o := &t.objs
	if o.Dump != nil {
		errs = append(errs, o.Dump.Close())
		o.Dump = nil
	}
	if o.FirstRecs != nil {
		errs = append(errs, o.FirstRecs.Close())
		o.FirstRecs = nil
	}
	return errors.Join(errs...)
}
