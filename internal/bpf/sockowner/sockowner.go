// Package sockowner lists which process holds which socket through a BPF
// task-file iterator (sockowner.c, iter/task_file: 5.8+): one record per
// socket descriptor of every process, read in one stream, where a scan of
// /proc reads a link per descriptor. The monitor (internal/tcpmon) falls
// back to /proc where it does not load.
package sockowner

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type owner_rec Sockowner sockowner.c -- -nostdinc -I../include -O2 -g -Wall -Werror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Iter is the loaded, attached iterator.
type Iter struct {
	prog *ebpf.Program
	link *link.Iter
	buf  []byte
}

// Load loads and attaches the iterator (an error on kernels without
// iter/task_file or BTF: the caller scans /proc instead).
func Load() (*Iter, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	var objs SockownerObjects
	if err := LoadSockownerObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("load socket owner iterator: %w", err)
	}
	l, err := link.AttachIter(link.IterOptions{Program: objs.Owners})
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("attach socket owner iterator: %w", err)
	}
	return &Iter{prog: objs.Owners, link: l}, nil
}

// Close detaches and unloads the iterator.
func (it *Iter) Close() error {
	return errors.Join(it.link.Close(), it.prog.Close())
}

const recSize = int(unsafe.Sizeof(SockownerOwnerRec{}))

// Each walks every process the caller's pid namespace sees and calls fn
// for every socket descriptor: the socket's inode number, the process id
// and name (comm aliases a buffer: valid during the call only).
func (it *Iter) Each(fn func(ino uint64, pid int, comm []byte)) error {
	r, err := it.link.Open()
	if err != nil {
		return fmt.Errorf("open socket owner iterator: %w", err)
	}
	defer r.Close()
	if len(it.buf) == 0 {
		it.buf = make([]byte, 1024*recSize)
	}
	have := 0
	for {
		n, err := r.Read(it.buf[have:])
		have += n
		off := 0
		for ; have-off >= recSize; off += recSize {
			x := (*SockownerOwnerRec)(unsafe.Pointer(&it.buf[off]))
			c := unsafe.Slice((*byte)(unsafe.Pointer(&x.Comm[0])), len(x.Comm))
			if i := bytes.IndexByte(c, 0); i >= 0 {
				c = c[:i]
			}
			fn(x.Ino, int(x.Tgid), c)
		}
		have = copy(it.buf, it.buf[off:have])
		if err == io.EOF || (n == 0 && err == nil) {
			if have != 0 {
				return fmt.Errorf("socket owner iterator: %d bytes of a partial record", have)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read socket owner iterator: %w", err)
		}
	}
}

// Probe loads and attaches the iterator, then unloads it: nil if the
// monitor can find socket owners through it on this kernel.
func Probe() error {
	it, err := Load()
	if err != nil {
		return err
	}
	return it.Close()
}
