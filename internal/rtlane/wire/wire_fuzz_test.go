// wire_fuzz_test.go: the client protocol's parsers fuzzed (go test -fuzz;
// make test runs the seeds as ordinary tests). Properties: no input
// panics; what parses encodes back to what parses the same (requests) or
// to the same bytes (replies, whose header has no unused byte).
package wire

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"
)

func FuzzParseRequest(f *testing.F) {
	for _, r := range []Request{
		{Type: TypeSend, Flags: FlagRelative, Flow: 7, Seq: 1, Deadline: 1000, Dst: netip.MustParseAddrPort("10.0.0.1:9"), Payload: []byte("x")},
		{Type: TypeSend, Deadline: 1 << 63, Dst: netip.MustParseAddrPort("[2001:db8::1]:443"), Sock: 3},
		{Type: TypeSend, Dst: netip.MustParseAddrPort("[::ffff:10.1.2.3]:5")},
		{Type: TypeAttach},
		{Type: TypeStats, Seq: 9},
	} {
		f.Add(AppendRequest(nil, &r))
	}
	f.Add([]byte{})
	f.Add(make([]byte, RequestSize))
	f.Add(append([]byte{Version, TypeSend, 0, 5}, make([]byte, RequestSize)...)) // family 5
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			return
		}
		if r.Dst.IsValid() && r.Dst.Addr().Is4In6() {
			t.Fatalf("an IPv4-mapped destination kept mapped: %v", r.Dst)
		}
		enc := AppendRequest(nil, &r)
		if len(enc) != len(b) {
			t.Fatalf("%d bytes encode back to %d", len(b), len(enc))
		}
		r2, err := ParseRequest(enc)
		if err != nil {
			t.Fatalf("its own encoding does not parse: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("parsed %+v, re-encoded and parsed %+v", r, r2)
		}
		if !bytes.Equal(AppendRequest(nil, &r2), enc) {
			t.Fatal("encoding is not stable")
		}
	})
}

func FuzzParseReply(f *testing.F) {
	for _, r := range []Reply{
		{Type: TypeAdmit, Flow: 1, Seq: 2, Depth: 3, Slack: -5, Time: 1 << 62},
		{Type: TypeReject, Reason: ReasonBadDeadline},
		{Type: TypeAttached, Sock: 8},
		{Type: TypeStatsOK, Body: []byte(`{"depth":0}`)},
	} {
		f.Add(AppendReply(nil, &r))
	}
	f.Add([]byte{})
	f.Add(make([]byte, ReplySize-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReply(b)
		if err != nil {
			if len(b) >= ReplySize && b[0] == Version {
				t.Fatalf("a reply of %d bytes with the version refused: %v", len(b), err)
			}
			return
		}
		if enc := AppendReply(nil, &r); !bytes.Equal(enc, b) {
			t.Fatalf("%x encodes back to %x", b, enc)
		}
		_ = ReasonString(r.Reason)
	})
}
