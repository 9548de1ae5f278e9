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

// withDown adds a downlink section (version 2) to a.
func withDown(a *Announcement) *Announcement {
	a.DownFlows, a.DownGoodputKbit = 2, 17000
	a.Down = []DownSummary{{MSS: 1448, MinRTT: 100 * time.Millisecond, Demand: 0xffffffff},
		{MSS: 1448, MinRTT: 40 * time.Millisecond, Demand: 52000}}
	return a
}

func TestRoundTrip(t *testing.T) {
	for _, down := range []bool{false, true} {
		for _, key := range [][]byte{nil, testKey} {
			a := sampleAnnouncement()
			if down {
				withDown(a)
			}
			a.UpStopped, a.DownStopped = down, key != nil // every combination of the fallback flags
			a.GoodputOver = uint8(btoi(key != nil)) * 37  // the goodput's share beyond the interface's bytes
			if down {
				a.DownGoodputOver = 200
			}
			b := Encode(a, key)
			if got, want := b[3]&(flagUpStop|flagDnStop), byte(btoi(down))<<2|byte(btoi(key != nil))<<3; got != want {
				t.Errorf("fallback flags %02x, want %02x", got, want)
			}
			if len(b) > MaxSize {
				t.Fatalf("encoded %d bytes > MaxSize", len(b))
			}
			if want := byte(1 + btoi(down)); b[2] != want {
				t.Errorf("down=%v: version %d, want %d", down, b[2], want)
			}
			got, err := Decode(b, key)
			if err != nil {
				t.Fatalf("key=%v down=%v: decode: %v", key != nil, down, err)
			}
			if !got.Time.Equal(a.Time) {
				t.Errorf("time %v != %v", got.Time, a.Time)
			}
			got.Time = a.Time
			if !reflect.DeepEqual(got, a) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, a)
			}
		}
	}
	// many flows: capped at MaxFlowRecords, still within MaxSize
	a := withDown(sampleAnnouncement())
	for len(a.Flows) < 100 {
		a.Flows = append(a.Flows, a.Flows[0])
		a.Down = append(a.Down, a.Down[0])
	}
	b := Encode(a, testKey)
	if len(b) != MaxSize {
		t.Errorf("full announcement %d bytes, MaxSize %d", len(b), MaxSize)
	}
	if got, err := Decode(b, testKey); err != nil || len(got.Flows) != MaxFlowRecords || len(got.Down) != MaxFlowRecords {
		t.Errorf("full announcement: %v, %d flows, %d downloads", err, len(got.Flows), len(got.Down))
	}
}

// TestVersion1Unchanged: without downlink data the encoding is version 1,
// byte for byte the format before the downlink section (so peers that know
// only version 1 keep reading hosts that only upload).
func TestVersion1Unchanged(t *testing.T) {
	a := sampleAnnouncement()
	b := Encode(a, testKey)
	if b[2] != 1 || len(b) != headerLen+len(a.Flows)*flowRecordLen+tagLen {
		t.Fatalf("version %d, %d bytes", b[2], len(b))
	}
	// the version 1 layout, written out by hand for the second flow
	r := b[headerLen+flowRecordLen:]
	if r[0] != byte(lane.Background) || r[1] != 4 || r[3] != 69 || r[14] != 0x00 || r[15] != 0x30 {
		t.Errorf("flow record %x", r[:flowRecordLen])
	}
	// a version 2 body without its section is refused, not half-read
	v := bytes.Clone(b)
	v[2] = 2
	if _, err := Decode(v, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("version 2 without a downlink section: %v", err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestDecodeRefuses(t *testing.T) {
	good := Encode(withDown(sampleAnnouncement()), testKey)
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
		{"version 3", func() []byte { b := bytes.Clone(good); b[2] = 3; return b }(), ErrVersion},
		{"too many download records", func() []byte { b := bytes.Clone(good); b[headerLen+2*flowRecordLen+6] = 200; return b }(), ErrMalformed},
		{"download goodput over without a downlink goodput", func() []byte {
			a := withDown(sampleAnnouncement())
			a.DownGoodputKbit = 0
			b := Encode(a, nil)
			b[headerLen+2*flowRecordLen+7] = 1
			return b
		}(), ErrMalformed},
		{"unknown flag", func() []byte { b := bytes.Clone(good); b[3] |= 0x80; return b }(), ErrMalformed},
		{"unknown flag after the fallback's", func() []byte { b := bytes.Clone(good); b[3] |= 0x10; return b }(), ErrMalformed},
		{"goodput over without a goodput", func() []byte {
			a := sampleAnnouncement()
			a.GoodputKbit = 0
			b := Encode(a, nil)
			b[51] = 1
			return b
		}(), ErrMalformed},
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
	f.Add(Encode(withDown(sampleAnnouncement()), testKey))
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
