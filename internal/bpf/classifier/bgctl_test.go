// bgctl_test.go: the daemon's writes of a background class's control value
// (lanes_bg_ctl: its rate, each with a bump of empty_gen, as datapath's
// SetBgRate does at a decrease) while packets pass lose none of the
// classifier's counts: the state (lanes_bg_state) has the classifier as
// its one writer, so every packet sent is counted, every drop too.
package classifier

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
)

func TestBackgroundClassControlKeepsCounts(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.11")
	up := pkt{src: v4src, dst: peer, sport: 40006, dport: 443, proto: 17}
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	putBgCtl(t, objs, 0, ClassifierBgCtl{Rate: 200_000})
	const sent = 20000
	var writes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the controller's read-modify-write of the control value
		defer wg.Done()
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var ctl ClassifierBgCtl
			if err := objs.LanesBgCtl.Lookup(bgClassKey(0), &ctl); err != nil {
				t.Error(err)
				return
			}
			ctl.Rate = 100_000 + i%8*20_000
			ctl.EmptyGen++
			if err := objs.LanesBgCtl.Put(bgClassKey(0), ctl); err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	}()
	ok := passed(t, objs.LanesClassify, up.build(), sent)
	close(stop)
	wg.Wait()
	c := bgState(t, objs, 0)
	t.Logf("%d packets, %d passed, %d control writes meanwhile; state %+v", sent, ok, writes.Load(), c)
	if writes.Load() == 0 {
		t.Fatal("no control write while packets passed")
	}
	if c.Packets != sent || c.Drops != uint64(sent-ok) {
		t.Errorf("state counted %d packets, %d drops; %d sent, %d dropped", c.Packets, c.Drops, sent, sent-ok)
	}
}
