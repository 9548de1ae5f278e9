// ifbredirect.go: whether an IFB delivers what a tc program's bpf_redirect
// hands it. Linux 5.10's bpf_redirect does not mark a packet redirected,
// and the IFB drops every unmarked one: IFB devices exist there, but the
// background QUIC/UDP class's arrivals cannot be shaped on them.
package features

import (
	"errors"
	"net"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// errIfbRefuses: the IFB dropped the redirected datagram.
var errIfbRefuses = errors.New("the IFB drops what bpf_redirect hands it (this kernel does not mark the packet redirected)")

// ifbDelivers redirects loopback's arrivals to ifb with a tc program and
// sends itself a UDP datagram: nil when it arrives. Called on a thread in
// a scratch namespace (its loopback and ifb are its own).
func ifbDelivers(ifb netlink.Link) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	for _, l := range []netlink.Link{lo, ifb} {
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R1, int32(ifb.Attrs().Index)),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
	}})
	if err != nil {
		return err
	}
	defer prog.Close()
	idx := lo.Attrs().Index
	q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := netlink.QdiscAdd(q); err != nil {
		return err
	}
	f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.HANDLE_MIN_INGRESS,
		Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL}, Fd: prog.FD(), Name: "lanes-ifbprobe", DirectAction: true}
	if err := netlink.FilterAdd(f); err != nil {
		return err
	}
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.WriteTo([]byte("lanes"), c.LocalAddr()); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, _, err := c.ReadFrom(make([]byte, 16)); err != nil {
		return errIfbRefuses
	}
	return nil
}
