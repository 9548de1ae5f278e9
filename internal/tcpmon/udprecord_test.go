package tcpmon

import (
	"strings"
	"testing"
)

// TestReadFlowsSkipsUDP: `lanes monitor --json` writes UDP flows' records
// ("proto":"udp") beside the TCP flows'; readers of flows skip them.
func TestReadFlowsSkipsUDP(t *testing.T) {
	in := `{"time":"2026-01-02T03:04:05Z","cookie":1,"src":"10.0.0.1:1","dst":"10.0.0.2:2","state":"ESTAB","cwnd":10}
{"time":"2026-01-02T03:04:05Z","proto":"udp","cookie":2,"src":"10.0.0.1:3","dst":"*:*","state":"unconnected","lane":"background","why":"cgroup"}
`
	flows, err := ReadFlows(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != 1 || flows[0].Cookie != 1 {
		t.Errorf("flows %+v, want the TCP record alone", flows)
	}
}
