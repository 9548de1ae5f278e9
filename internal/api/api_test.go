// Tests of the protocol's request decoding (table + fuzz).
package api

import (
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/lane"
)

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{`{"op":"ping"}`, ""},
		{`{"op":"register","flow":{"dst":"192.0.2.1","dport":443,"sport":40000},"lane":"background"}`, ""},
		{`{"op":"register","flow":{"dst":"2001:db8::1","dport":443,"sport":40000,"proto":"udp"},"lane":"bg"}`, ""},
		{`{"op":"move-pid","pid":42,"lane":"background"}`, ""},
		{``, "bad request"},
		{`{`, "bad request"},
		{`[]`, "bad request"},
		{`{"op":"ping"} {"op":"ping"}`, "trailing data"},
		{`{"op":"launch"}`, `unknown op "launch"`},
		{`{}`, "missing op"},
		{`{"op":"ping","extra":1}`, "unknown field"},
		{`{"op":"register","lane":"background"}`, "needs a flow"},
		{`{"op":"register","flow":{"dst":"x","dport":1,"sport":2},"lane":"background"}`, "not an IP address"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":0},"lane":"background"}`, "sport missing"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":70000,"sport":1},"lane":"background"}`, "bad request"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":1,"proto":"sctp"},"lane":"background"}`, "want tcp or udp"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":1},"lane":"fastest"}`, "unknown lane"},
		{`{"op":"register","flow":{"dst":"10.0.0.1","dport":1,"sport":1}}`, "needs a lane"},
		{`{"op":"move-pid","pid":-3,"lane":"background"}`, "pid > 0"},
		{`{"op":"lane-cgroup"}`, "needs a lane"},
		{`{"op":"component","name":"coop"}`, ""},
		{`{"op":"component"}`, "needs a name"},
	} {
		_, err := DecodeRequest([]byte(tc.in))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("DecodeRequest(%s) = %v; want error containing %q", tc.in, err, tc.err)
		}
	}
	if _, err := DecodeRequest([]byte(strings.Repeat(" ", MaxLine+1))); err == nil {
		t.Error("over-long request accepted")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"op":"register","flow":{"dst":"192.0.2.1","dport":443,"sport":40000},"lane":"background"}`))
	f.Add([]byte(`{"op":"move-pid","pid":1,"lane":"realtime"}`))
	f.Add([]byte(`{"op":"status"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		// Whatever decodes must be a request the handlers can take as is.
		switch r.Op {
		case OpRegister, OpUnregister:
			if r.Flow == nil || r.Flow.Validate() != nil {
				t.Fatalf("accepted bad flow: %s", b)
			}
		case OpMovePID:
			if r.PID <= 0 || r.Lane == lane.Unset {
				t.Fatalf("accepted bad move: %s", b)
			}
		}
	})
}
