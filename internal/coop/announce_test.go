// Tests of the announcement codec: round trip, authentication, and that
// forged, unauthenticated, oversized and malformed datagrams are refused.
package coop

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func sampleAnnouncement() *Announcement {
	return &Announcement{
		HostID: 0x1122334455667788, Seq: 42, Time: time.Unix(1700000000, 123456789),
		Interval: 500 * time.Millisecond, ActiveFlows: 2, BytesWaiting: 3 << 20, GoodputKbit: 9800,
		LaneMix: [3]uint16{1, 0, 1},
		Flows: []FlowSummary{
			{Lane: lane.Realtime, CAState: 0, Cwnd: 20, MSS: 1448, SRTT: 260 * time.Millisecond, MinRTT: 256 * time.Millisecond, Queued: 30000},
			{Lane: lane.Background, CAState: 4, Cwnd: 69, MSS: 1448, SRTT: 300 * time.Millisecond, MinRTT: 256 * time.Millisecond, Queued: 3 << 20},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, key := range [][]byte{nil, testKey} {
		a := sampleAnnouncement()
		b := Encode(a, key)
		if len(b) > MaxSize {
			t.Fatalf("encoded %d bytes > MaxSize", len(b))
		}
		got, err := Decode(b, key)
		if err != nil {
			t.Fatalf("key=%v: decode: %v", key != nil, err)
		}
		if !got.Time.Equal(a.Time) {
			t.Errorf("time %v != %v", got.Time, a.Time)
		}
		got.Time = a.Time
		if !reflect.DeepEqual(got, a) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, a)
		}
	}
	// many flows: capped at MaxFlowRecords, still within MaxSize
	a := sampleAnnouncement()
	for len(a.Flows) < 100 {
		a.Flows = append(a.Flows, a.Flows[0])
	}
	b := Encode(a, testKey)
	if len(b) != MaxSize {
		t.Errorf("full announcement %d bytes, MaxSize %d", len(b), MaxSize)
	}
	if got, err := Decode(b, testKey); err != nil || len(got.Flows) != MaxFlowRecords {
		t.Errorf("full announcement: %v, %d flows", err, len(got.Flows))
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Encode(sampleAnnouncement(), testKey)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	untagged := Encode(sampleAnnouncement(), nil)
	otherKey := Encode(sampleAnnouncement(), []byte("another-group-key-of-32-bytes!!!"))
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"forged body", flip(40), ErrForged},
		{"forged tag", flip(len(good) - 1), ErrForged},
		{"other group's key", otherKey, ErrForged},
		{"unauthenticated", untagged, ErrUnauthenticated},
		{"oversized", make([]byte, MaxSize+1), ErrOversized},
		{"empty", nil, ErrMalformed},
		{"short", good[:20], ErrMalformed},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"trailing byte", append(bytes.Clone(good), 0), ErrMalformed},
		{"bad magic", flip(0), ErrMalformed},
		{"version 2", flip(2)[:len(good)], ErrVersion},
		{"unknown flag", func() []byte { b := bytes.Clone(good); b[3] |= 0x80; return b }(), ErrMalformed},
		{"reserved", flip(51), ErrMalformed},
		{"too many records", func() []byte { b := bytes.Clone(good); b[50] = 200; return b }(), ErrMalformed},
	}
	for _, c := range cases {
		_, err := Decode(c.b, testKey)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// a bad lane value is malformed even without a key
	b := bytes.Clone(untagged)
	b[headerLen] = 9
	if _, err := Decode(b, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad lane: %v", err)
	}
	// without a key, untagged and tagged announcements pass
	for _, b := range [][]byte{untagged, good} {
		if _, err := Decode(b, nil); err != nil {
			t.Errorf("no key: %v", err)
		}
	}
}

// FuzzDecode: the decoder never panics, and whatever it accepts re-encodes to
// exactly the same bytes (one canonical form: nothing is half-parsed).
func FuzzDecode(f *testing.F) {
	f.Add(Encode(sampleAnnouncement(), testKey))
	f.Add(Encode(sampleAnnouncement(), nil))
	f.Add(Encode(&Announcement{HostID: 1, Time: time.Unix(0, 5)}, testKey))
	f.Add([]byte("LC\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, key := range [][]byte{testKey, nil} {
			a, err := Decode(b, key)
			if err != nil {
				continue
			}
			if len(b) > MaxSize {
				t.Fatalf("accepted %d bytes", len(b))
			}
			enc := Encode(a, key)
			if key != nil && !bytes.Equal(enc, b) {
				t.Fatalf("re-encoding differs:\n in %x\nout %x", b, enc)
			}
			// without a key a tagged input re-encodes untagged: flags differ
			if key == nil && (!bytes.Equal(enc[:3], b[:3]) || !bytes.Equal(enc[4:], b[4:len(enc)])) {
				t.Fatalf("re-encoding (no key) differs:\n in %x\nout %x", b, enc)
			}
		}
	})
}
