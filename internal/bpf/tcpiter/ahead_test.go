// ahead_test.go: a walk read ahead (ReadAhead) yields exactly the records,
// in the same order, that Reader.Each yields for the same stream, whatever
// sizes the reads return; the reader's errors reach the caller.
package tcpiter

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"
	"unsafe"
)

// chunky returns a stream in reads of random sizes (records split
// between reads included), as an iterator's walk may.
type chunky struct {
	b   []byte
	rng *rand.Rand
	err error // returned at the end instead of io.EOF
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rng.Intn(40<<10))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// stream is n random records.
func stream(rng *rand.Rand, n int) []byte {
	b := make([]byte, n*RecSize)
	rng.Read(b)
	return b
}

func TestReadAheadSameRecords(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	// 0 records, less than a buffer, several, and more than all the
	// buffers hold (the reader waits for the caller).
	for _, n := range []int{0, 1, 500, 5000, aheadBufs*aheadBuf/RecSize + 3000} {
		data := stream(rng, n)
		var want, got []byte
		var rd Reader
		if err := rd.Each(&chunky{b: data, rng: rand.New(rand.NewSource(int64(n)))}, func(x *Rec) {
			want = append(want, asBytes(x)...)
		}); err != nil {
			t.Fatal(err)
		}
		a, err := ReadAhead(&chunky{b: data, rng: rand.New(rand.NewSource(int64(n) + 1))})
		if err != nil {
			t.Fatal(err)
		}
		err = a.Each(func(x *Rec) { got = append(got, asBytes(x)...) })
		if cerr := a.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		if !bytes.Equal(want, data) || !bytes.Equal(got, data) {
			t.Fatalf("%d records: Reader.Each gave %d bytes, ReadAhead %d, want the %d of the stream, equal",
				n, len(want), len(got), len(data))
		}
	}
}

func TestReadAheadErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"read error", &chunky{b: stream(rng, 3000), rng: rng, err: boom}},
		{"partial record", &chunky{b: stream(rng, 3000)[:3000*RecSize-5], rng: rng}},
	} {
		a, err := ReadAhead(tc.r)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = a.Each(func(*Rec) { n++ })
		a.Close()
		if err == nil {
			t.Errorf("%s: no error after %d records", tc.name, n)
		}
	}
	// Closed without taking the records: the reader stops.
	a, err := ReadAhead(&chunky{b: stream(rng, 50000), rng: rng})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func asBytes(x *Rec) []byte {
	return bytes.Clone(unsafe.Slice((*byte)(unsafe.Pointer(x)), RecSize))
}
