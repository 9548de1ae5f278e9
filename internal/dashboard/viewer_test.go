// viewer_test.go: the page shows a flow's pid and comm to its owner, root
// and SeesAll, never to another user.
package dashboard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

// TestOthersPIDsHidden (audit N22): the dashboard showed every user's pid
// and comm to any local user. Fix: a client sees them for its own uid's
// flows; for all only as root or as a uid SeesAll names.
func TestOthersPIDsHidden(t *testing.T) {
	const nobody, member = 65534, 65533
	s, addr := serveBig(t, 2, Config{SeesAll: func(uid uint32) bool { return uid == member }})
	s.mu.Lock()
	for c, own := range map[uint64]uint32{1: 0, 2: nobody} {
		v := &s.flows[c].view
		v.PID, v.Comm, v.uid = int(100+c), fmt.Sprintf("app%d", c), own
	}
	s.mu.Unlock()
	get := func(uid uint32) map[uint64]string {
		var c net.Conn
		testutil.AsUser(t, uid, uid, nil, func() (err error) { c, err = net.Dial("tcp", addr); return err })
		defer c.Close()
		fmt.Fprintf(c, "GET /api/snapshot HTTP/1.0\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		var snap struct {
			Flows []FlowView `json:"flows"`
		}
		if err := json.Unmarshal(body, &snap); err != nil {
			t.Fatalf("snapshot as uid %d: %v: %.200s", uid, err, body)
		}
		out := map[uint64]string{}
		for _, f := range snap.Flows {
			out[f.Cookie] = fmt.Sprintf("%d/%s", f.PID, f.Comm)
		}
		return out
	}
	for _, c := range []struct {
		uid   uint32
		want1 string // root's flow
		want2 string // nobody's
	}{
		{0, "101/app1", "102/app2"},
		{member, "101/app1", "102/app2"},
		{nobody, "0/", "102/app2"},
		{1000, "0/", "0/"},
	} {
		got := get(c.uid)
		if got[1] != c.want1 || got[2] != c.want2 {
			t.Errorf("uid %d sees root's flow as %q, nobody's as %q; want %q, %q", c.uid, got[1], got[2], c.want1, c.want2)
		}
	}
}
