// announce.go: the announcement every cooperating host broadcasts each
// interval — a compact, versioned, size-bounded binary record of its uplink
// and downlink load, authenticated with HMAC-SHA256 under the group key.
//
// Layout (versions 1 and 2, big endian; docs/coop-protocol.md is the
// reference):
//
//	off len field
//	  0   2 magic "LC"
//	  2   1 version (1)
//	  3   1 flags: bit0 tagged (HMAC present), bit1 leaving (goodbye),
//	        bit2 / bit3 this host stopped capping its uploads / downloads on
//	        its own evidence of foreign traffic (safety.go)
//	  4   8 host id
//	 12   8 sequence (strictly increasing per host)
//	 20   8 timestamp, unix nanoseconds
//	 28   2 sender's interval, ms
//	 30   2 active uplink flows
//	 32   8 bytes waiting (demand: unsent + in flight, summed)
//	 40   4 goodput, kbit/s
//	 44   6 lane mix: active flows in realtime, interactive, background (3 x u16)
//	 50   1 k = number of flow records (<= MaxFlowRecords)
//	 51   1 goodput over: 256ths of the goodput beyond what left the
//	        interface (a loss's catch-up, arrivals.go;
//	        0 when the goodput is 0)
//	 52 18k flow records: lane u8, ca_state u8, cwnd u16 (segments),
//	        mss u16, srtt u32 (us), min_rtt u32 (us), queued u32 (bytes, saturating)
//	  .   8 version 2 only, the downlink section: active downloads u16,
//	        downlink goodput u32 (kbit/s), d = number of download records
//	        u8 (<= MaxFlowRecords), downlink goodput over u8 (256ths of
//	        the downlink goodput beyond what arrived on the interface;
//	        0 when that goodput is 0)
//	  .  10d download records: mss u16, min_rtt u32 (us), demand u32
//	        (bytes of window needed; 0xffffffff = window-limited, bulk)
//	  .  32 HMAC-SHA256(key, all preceding bytes), when tagged
//
// Version 2 is version 1 plus the downlink section. A host sends version 1
// (byte for byte the old format) while it has no downlink to report, so a
// version-1-only peer keeps understanding hosts that only upload; it drops
// a version 2 announcement as bad_version.
//
// A peer from before bits 2 and 3 drops an announcement carrying them as
// malformed (counted), so while this host's fallback holds such a peer
// stops counting it after the peer timeout, as it would a host gone.
//
// A peer that reads byte 51 (and the downlink section's last header
// byte) as reserved drops an announcement with a goodput over
// as malformed: only in the intervals the bound lowered, a loss's
// catch-up.
//
// Note: decoding is strict (exact length, known version, zero reserved
// byte): anything else is dropped and counted, never half-parsed.
package coop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
)

// Protocol constants.
const (
	Version        = 2 // the newest; 1 has no downlink section
	headerLen      = 52
	flowRecordLen  = 18
	downHeaderLen  = 8
	downRecordLen  = 10
	tagLen         = sha256.Size
	MaxFlowRecords = 32
	// MaxSize is the largest valid announcement; longer datagrams are dropped.
	MaxSize = headerLen + MaxFlowRecords*flowRecordLen + downHeaderLen + MaxFlowRecords*downRecordLen + tagLen

	flagTagged  = 1 << 0
	flagLeaving = 1 << 1
	flagUpStop  = 1 << 2
	flagDnStop  = 1 << 3
)

var magic = [2]byte{'L', 'C'}

// Reasons an announcement is dropped; each is counted separately.
var (
	ErrMalformed       = errors.New("malformed announcement")
	ErrOversized       = errors.New("oversized announcement")
	ErrVersion         = errors.New("unknown protocol version")
	ErrUnauthenticated = errors.New("announcement without authentication tag")
	ErrForged          = errors.New("announcement with a bad authentication tag")
	ErrReplayed        = errors.New("replayed announcement (sequence not increasing)")
	ErrStale           = errors.New("announcement outside the clock-skew window")
	ErrOwn             = errors.New("own announcement")
)

// FlowSummary is one uplink flow as announced.
type FlowSummary struct {
	Lane    lane.Lane
	CAState uint8
	Cwnd    uint16
	MSS     uint16
	SRTT    time.Duration
	MinRTT  time.Duration
	Queued  uint32 // bytes waiting: unsent + in flight, saturating
}

// DownSummary is one download as announced (version 2).
type DownSummary struct {
	MSS    uint16
	MinRTT time.Duration
	Demand uint32 // window needed, bytes; math.MaxUint32 = window-limited
}

// Announcement is one host's state as broadcast to its peers.
type Announcement struct {
	HostID   uint64
	Seq      uint64
	Time     time.Time
	Interval time.Duration
	Leaving  bool
	// UpStopped, DownStopped: this host's safety fallback stopped its
	// upload / download caps on its own evidence of foreign traffic (not
	// because it follows a peer's), so its peers stop theirs too.
	UpStopped    bool
	DownStopped  bool
	ActiveFlows  uint16
	BytesWaiting uint64
	GoodputKbit  uint32
	// GoodputOver: 256ths of GoodputKbit beyond what left the host's
	// interface in the interval (arrivals.go); 0 when GoodputKbit is 0
	GoodputOver uint8
	LaneMix     [3]uint16 // realtime, interactive, background
	Flows       []FlowSummary
	// The downlink section (version 2): active downloads, downlink
	// goodput and one record per download (at most MaxFlowRecords).
	DownFlows       uint16
	DownGoodputKbit uint32
	// DownGoodputOver: 256ths of DownGoodputKbit beyond what arrived on
	// the host's interface in the interval (arrivals.go)
	DownGoodputOver uint8
	Down            []DownSummary
}

// hasDown reports whether a carries a downlink section (version 2).
func (a *Announcement) hasDown() bool {
	return a.DownFlows > 0 || a.DownGoodputKbit > 0 || len(a.Down) > 0
}

// Encode serializes a; with a non-empty key the HMAC tag is appended.
// At most MaxFlowRecords flows are encoded (the rest only count in totals).
func Encode(a *Announcement, key []byte) []byte {
	k := len(a.Flows)
	if k > MaxFlowRecords {
		k = MaxFlowRecords
	}
	kd := min(len(a.Down), MaxFlowRecords)
	n := headerLen + k*flowRecordLen
	if a.hasDown() {
		n += downHeaderLen + kd*downRecordLen
	}
	b := make([]byte, n, n+tagLen)
	copy(b[0:2], magic[:])
	b[2] = 1
	if a.hasDown() {
		b[2] = 2
	}
	if len(key) > 0 {
		b[3] |= flagTagged
	}
	if a.Leaving {
		b[3] |= flagLeaving
	}
	if a.UpStopped {
		b[3] |= flagUpStop
	}
	if a.DownStopped {
		b[3] |= flagDnStop
	}
	be := binary.BigEndian
	be.PutUint64(b[4:], a.HostID)
	be.PutUint64(b[12:], a.Seq)
	be.PutUint64(b[20:], uint64(a.Time.UnixNano()))
	be.PutUint16(b[28:], uint16(min(a.Interval.Milliseconds(), 65535)))
	be.PutUint16(b[30:], a.ActiveFlows)
	be.PutUint64(b[32:], a.BytesWaiting)
	be.PutUint32(b[40:], a.GoodputKbit)
	if a.GoodputKbit > 0 {
		b[51] = a.GoodputOver
	}
	for i, v := range a.LaneMix {
		be.PutUint16(b[44+2*i:], v)
	}
	b[50] = byte(k)
	for i := 0; i < k; i++ {
		f := a.Flows[i]
		r := b[headerLen+i*flowRecordLen:]
		r[0] = byte(f.Lane)
		r[1] = f.CAState
		be.PutUint16(r[2:], f.Cwnd)
		be.PutUint16(r[4:], f.MSS)
		be.PutUint32(r[6:], usec(f.SRTT))
		be.PutUint32(r[10:], usec(f.MinRTT))
		be.PutUint32(r[14:], f.Queued)
	}
	if a.hasDown() {
		d := b[headerLen+k*flowRecordLen:]
		be.PutUint16(d[0:], a.DownFlows)
		be.PutUint32(d[2:], a.DownGoodputKbit)
		d[6] = byte(kd)
		if a.DownGoodputKbit > 0 {
			d[7] = a.DownGoodputOver
		}
		for i := 0; i < kd; i++ {
			f := a.Down[i]
			r := d[downHeaderLen+i*downRecordLen:]
			be.PutUint16(r[0:], f.MSS)
			be.PutUint32(r[2:], usec(f.MinRTT))
			be.PutUint32(r[6:], f.Demand)
		}
	}
	if len(key) > 0 {
		m := hmac.New(sha256.New, key)
		m.Write(b)
		b = m.Sum(b)
	}
	return b
}

func usec(d time.Duration) uint32 {
	us := d.Microseconds()
	switch {
	case us < 0:
		return 0
	case us > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(us)
}

// Decode parses and authenticates one datagram. With a key, only tagged
// announcements with a valid tag pass; without one, any well-formed
// announcement passes (peers are unauthenticated).
func Decode(b []byte, key []byte) (*Announcement, error) {
	f, err := parseFrame(b)
	if err != nil {
		return nil, err
	}
	if err := verifyTag(b, f, key); err != nil {
		return nil, err
	}
	a := decodeHeader(b)
	if a.Flows, err = decodeFlows(b, f.flows); err != nil {
		return nil, err
	}
	if b[2] == 2 {
		if err := decodeDown(a, b[headerLen+f.flows*flowRecordLen:], f.downs); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// frame is what parseFrame learns of an announcement's layout: its record
// counts and where the signed body ends.
type frame struct {
	flows, downs int
	body         int
}

// parseFrame checks an announcement's size, magic, version, flags and
// record counts, and that its length matches them exactly.
func parseFrame(b []byte) (frame, error) {
	if len(b) > MaxSize {
		return frame{}, fmt.Errorf("%w: %d bytes > %d", ErrOversized, len(b), MaxSize)
	}
	if len(b) < headerLen || b[0] != magic[0] || b[1] != magic[1] {
		return frame{}, fmt.Errorf("%w: short or bad magic", ErrMalformed)
	}
	if b[2] != 1 && b[2] != 2 {
		return frame{}, fmt.Errorf("%w %d", ErrVersion, b[2])
	}
	if b[3]&^(flagTagged|flagLeaving|flagUpStop|flagDnStop) != 0 || b[51] != 0 && binary.BigEndian.Uint32(b[40:]) == 0 {
		return frame{}, fmt.Errorf("%w: unknown flags or reserved bits", ErrMalformed)
	}
	f := frame{flows: int(b[50])}
	if f.flows > MaxFlowRecords {
		return frame{}, fmt.Errorf("%w: %d flow records", ErrMalformed, f.flows)
	}
	f.body = headerLen + f.flows*flowRecordLen
	if b[2] == 2 {
		if len(b) < f.body+downHeaderLen {
			return frame{}, fmt.Errorf("%w: short downlink section", ErrMalformed)
		}
		f.downs = int(b[f.body+6])
		if f.downs > MaxFlowRecords || b[f.body+7] != 0 && binary.BigEndian.Uint32(b[f.body+2:]) == 0 {
			return frame{}, fmt.Errorf("%w: %d download records or reserved bits", ErrMalformed, f.downs)
		}
		f.body += downHeaderLen + f.downs*downRecordLen
	}
	want := f.body
	if b[3]&flagTagged != 0 {
		want += tagLen
	}
	if len(b) != want {
		return frame{}, fmt.Errorf("%w: length %d, want %d", ErrMalformed, len(b), want)
	}
	return f, nil
}

// verifyTag checks the HMAC over the body when a key is configured; an
// untagged announcement is then refused.
func verifyTag(b []byte, f frame, key []byte) error {
	if len(key) == 0 {
		return nil
	}
	if b[3]&flagTagged == 0 {
		return ErrUnauthenticated
	}
	m := hmac.New(sha256.New, key)
	m.Write(b[:f.body])
	if !hmac.Equal(m.Sum(nil), b[f.body:]) {
		return ErrForged
	}
	return nil
}

// decodeHeader reads the fixed header of a checked announcement.
func decodeHeader(b []byte) *Announcement {
	be := binary.BigEndian
	flags := b[3]
	a := &Announcement{
		HostID:       be.Uint64(b[4:]),
		Seq:          be.Uint64(b[12:]),
		Time:         time.Unix(0, int64(be.Uint64(b[20:]))),
		Interval:     time.Duration(be.Uint16(b[28:])) * time.Millisecond,
		Leaving:      flags&flagLeaving != 0,
		UpStopped:    flags&flagUpStop != 0,
		DownStopped:  flags&flagDnStop != 0,
		ActiveFlows:  be.Uint16(b[30:]),
		BytesWaiting: be.Uint64(b[32:]),
		GoodputKbit:  be.Uint32(b[40:]),
		GoodputOver:  b[51],
	}
	for i := range a.LaneMix {
		a.LaneMix[i] = be.Uint16(b[44+2*i:])
	}
	return a
}

// decodeFlows reads the k upload flow records after the header.
func decodeFlows(b []byte, k int) ([]FlowSummary, error) {
	if k == 0 {
		return nil, nil
	}
	be := binary.BigEndian
	flows := make([]FlowSummary, k)
	for i := range flows {
		r := b[headerLen+i*flowRecordLen:]
		l := lane.Lane(r[0])
		if l > lane.Background {
			return nil, fmt.Errorf("%w: flow %d has lane %d", ErrMalformed, i, r[0])
		}
		flows[i] = FlowSummary{
			Lane: l, CAState: r[1],
			Cwnd:   be.Uint16(r[2:]),
			MSS:    be.Uint16(r[4:]),
			SRTT:   time.Duration(be.Uint32(r[6:])) * time.Microsecond,
			MinRTT: time.Duration(be.Uint32(r[10:])) * time.Microsecond,
			Queued: be.Uint32(r[14:]),
		}
	}
	return flows, nil
}

// decodeDown reads version 2's downlink section d, holding kd records.
func decodeDown(a *Announcement, d []byte, kd int) error {
	be := binary.BigEndian
	a.DownFlows = be.Uint16(d[0:])
	a.DownGoodputKbit = be.Uint32(d[2:])
	a.DownGoodputOver = d[7]
	if a.DownFlows == 0 && a.DownGoodputKbit == 0 && kd == 0 { // one canonical form: that is version 1
		return fmt.Errorf("%w: empty downlink section", ErrMalformed)
	}
	if kd > 0 {
		a.Down = make([]DownSummary, kd)
	}
	for i := range a.Down {
		r := d[downHeaderLen+i*downRecordLen:]
		a.Down[i] = DownSummary{MSS: be.Uint16(r[0:]),
			MinRTT: time.Duration(be.Uint32(r[2:])) * time.Microsecond, Demand: be.Uint32(r[6:])}
	}
	return nil
}

// DropReason names the reason an announcement was refused, as counted.
func DropReason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{{ErrOversized, "oversized"}, {ErrVersion, "bad_version"}, {ErrUnauthenticated, "unauthenticated"},
		{ErrForged, "forged"}, {ErrReplayed, "replayed"}, {ErrStale, "stale"}, {ErrOwn, "own"},
		{ErrTableFull, "table_full"}, {ErrPeerRate, "peer_rate_limited"}, {ErrAddrConflict, "addr_conflict"},
		{ErrDuplicate, "duplicate"}, {ErrLate, "late"}, {ErrSeqJump, "seq_jump_held"}} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "malformed"
}
