// ahead.go: a walk read ahead on another goroutine (ReadAhead). The
// kernel's walk runs inside the read(2) calls, so a goroutine that reads
// while the caller handles the records already read puts the walk and the
// records' handling on two cores: the walk's wall time is then about the
// longer of the two, not their sum (the CPU time is the same). The
// buffers are outside the Go heap (an anonymous mapping), so a walk read
// ahead neither starts a garbage collection nor gives one more to do.
// The tracker's first walk (ReadFirst, first.go) writes its records into
// slots this process maps instead: then the read is one call that runs
// the whole walk, and Each takes the records from the slots as the kernel
// writes them (looking every firstPoll while nothing else comes).
package tcpiter

import (
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// The read-ahead buffers: aheadBufs of aheadBuf bytes, mapped once per
// walk; a page of the mapping is touched only when a read reaches it. A
// read of the iterator returns at most 32 KiB (its seq_file buffer), so a
// buffer is handed over after about 8 reads (~1,000 records): few
// hand-overs, and the first records reach the caller after ~1/100 of a
// walk of 100,000 sockets. 16 MiB hold ~60,000 records: the reader gets
// that far ahead of a caller that is busy with something else before it
// takes the records (the reader waits for a free buffer beyond).
const (
	aheadBuf  = 256 << 10
	aheadBufs = 64
)

// Ahead is a walk being read on another goroutine (ReadAhead).
type Ahead struct {
	mem  []byte
	full chan []byte // whole records, in walk order
	free chan []byte
	stop chan struct{}
	done chan struct{}
	err  error // the reader's; set before full is closed
	used bool  // Each ran
	// The first walk's slots (ReadFirst; nil: none) and how many of
	// them Each has taken.
	slots []byte
	taken int
}

// firstPoll is how often Each looks for new records in the first-walk
// slots while the stream has none (~200 records of a walk).
const firstPoll = 200 * time.Microsecond

// ReadAhead starts reading the walk r to its end on another goroutine.
// The caller then takes the records with Each and must call Close (before
// closing r) in any case. r must not depend on the calling thread (an
// iterator's walk does not: its namespace was taken when it was opened).
func ReadAhead(r io.Reader) (*Ahead, error) { return readAhead(r, nil) }

// readAhead is ReadAhead, with the first walk's slots (nil: none).
func readAhead(r io.Reader, slots []byte) (*Ahead, error) {
	mem, err := unix.Mmap(-1, 0, aheadBuf*aheadBufs, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("tcp iterator read-ahead buffers: %w", err)
	}
	a := &Ahead{mem: mem, full: make(chan []byte, aheadBufs), free: make(chan []byte, aheadBufs),
		stop: make(chan struct{}), done: make(chan struct{}), slots: slots}
	for i := range aheadBufs {
		a.free <- mem[i*aheadBuf : (i+1)*aheadBuf : (i+1)*aheadBuf]
	}
	go a.read(r)
	return a, nil
}

// read fills free buffers from r and hands them over holding whole
// records; a record split between two reads is carried to the next
// buffer.
func (a *Ahead) read(r io.Reader) {
	defer close(a.done)
	defer close(a.full)
	read := r.Read
	// Into slots, the walk is one read(2) of ~100 ms at 100,000 sockets:
	// a system call the runtime knows of, whose P (holding the caller's
	// poll timer, perhaps) it hands to another thread meanwhile.
	if w, ok := r.(walk); ok && a.slots == nil {
		read = w.readRaw
	}
	var carry [RecSize]byte
	have := 0 // bytes in carry
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.stop:
			return
		}
		n := copy(b, carry[:have])
		eof := false
		for len(b)-n >= RecSize {
			k, err := read(b[n:])
			n += k
			if err == io.EOF || (k == 0 && err == nil) {
				eof = true
				break
			}
			if err != nil {
				a.err = fmt.Errorf("read tcp iterator: %w", err)
				return
			}
			select {
			case <-a.stop:
				return
			default:
			}
		}
		whole := n - n%RecSize
		have = copy(carry[:], b[whole:n])
		a.full <- b[:whole]
		if eof {
			if have != 0 {
				a.err = fmt.Errorf("tcp iterator: %d bytes of a partial record", have)
			}
			return
		}
	}
}

// Each calls fn for every record of the walk, in order, as the reader
// hands them over, until the walk ends; the record is valid only during
// the call. It returns the reader's error, if any.
func (a *Ahead) Each(fn func(*Rec)) error {
	if a.used {
		return errors.New("tcp iterator read-ahead: Each called twice")
	}
	a.used = true
	if a.slots == nil {
		for b := range a.full {
			a.take(b, fn)
		}
		return a.err
	}
	poll := time.NewTimer(firstPoll)
	defer poll.Stop()
	for {
		a.takeSlots(fn)
		select {
		case b, ok := <-a.full:
			if !ok { // the walk ended: all its records are in the slots
				a.takeSlots(fn)
				return a.err
			}
			a.take(b, fn)
		case <-poll.C:
		}
		poll.Reset(firstPoll)
	}
}

// take calls fn for the records of a buffer from the reader and gives
// the buffer back.
func (a *Ahead) take(b []byte, fn func(*Rec)) {
	for off := 0; off < len(b); off += RecSize {
		fn(asRec(b[off:]))
	}
	a.free <- b[:cap(b)]
}

// takeSlots calls fn for the records the kernel has written into the
// first walk's slots since the last call.
func (a *Ahead) takeSlots(fn func(*Rec)) {
	for n := firstCount(a.slots); a.taken < n; {
		a.taken++
		fn(asRec(a.slots[a.taken*RecSize:]))
	}
}

// Close stops the reader (after its read in progress, if Each did not
// take the walk to its end) and frees the buffers.
func (a *Ahead) Close() error {
	close(a.stop)
	for range a.full { // the reader may wait to hand one over
	}
	<-a.done
	return unix.Munmap(a.mem)
}
