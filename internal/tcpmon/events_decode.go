// events_decode.go: decoding a ring buffer record into tcpevents.Event
// without reflection (binary.Read is slow on the per-ACK path).
package tcpmon

import (
	"encoding/binary"
	"unsafe"

	"github.com/lanes-net/lanes/internal/bpf/tcpevents"
)

const sizeofEvent = unsafe.Sizeof(tcpevents.Event{})

func decodeRawEvent(b []byte) tcpevents.Event {
	var e tcpevents.Event
	ne := binary.NativeEndian
	e.TsNs = ne.Uint64(b[0:])
	e.Cookie = ne.Uint64(b[8:])
	e.Skaddr = ne.Uint64(b[16:])
	e.DurationNs = ne.Uint64(b[24:])
	copy(e.Saddr[:], b[32:48])
	copy(e.Daddr[:], b[48:64])
	e.Sport = ne.Uint16(b[64:])
	e.Dport = ne.Uint16(b[66:])
	e.Family = ne.Uint16(b[68:])
	e.Kind = b[70]
	e.Oldstate = b[71]
	e.Newstate = b[72]
	e.SndCwnd = ne.Uint32(b[76:])
	e.Ssthresh = ne.Uint32(b[80:])
	e.SndWnd = ne.Uint32(b[84:])
	e.SrttUs = ne.Uint32(b[88:])
	e.RcvWnd = ne.Uint32(b[92:])
	e.SndNxt = ne.Uint32(b[96:])
	e.SndUna = ne.Uint32(b[100:])
	e.DataLen = ne.Uint32(b[104:])
	e.Pid = ne.Uint32(b[108:])
	for i := range e.Comm {
		e.Comm[i] = int8(b[112+i])
	}
	return e
}
