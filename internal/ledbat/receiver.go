// receiver.go is rLEDBAT (RFC 9840) on the receive side of one socket: the
// same LEDBAT++ arithmetic run on what the receiving kernel exposes, which
// gives the receive window a background download advertises. It is the Go
// twin of rledbat_packet in internal/bpf/sockops/rledbat.h (struct
// rl_state), step for step, and what the daemon runs where sock_ops may not
// set TCP_WINDOW_CLAMP (internal/rledbat).
//
//   - delay: the kernel's receive-side RTT estimate from TCP timestamps
//     (tcp_sock.rcv_rtt_est, tcp_info's tcpi_rcv_rtt), one sample each time
//     it changes;
//   - progress: bytes received (rcv_nxt's advance) in segments of advmss
//     = packets "acked";
//   - loss: a new out-of-order segment (tcpi_rcv_ooopack), at most once per
//     RTT, halves the window;
//   - a socket that has received no timed data is left alone.
package ledbat

// rLEDBAT window bounds, as in rledbat.h.
const (
	RecvInitWnd = 10    // packets, as an initial cwnd
	RecvMaxWnd  = 65535 // packets
	RecvMinMSS  = 536   // an advmss below this counts as this
)

// RecvSample is what the kernel says about a receiving socket at one step.
type RecvSample struct {
	NowUS  uint64 // monotonic microsecond clock (tcp_mstamp, CLOCK_MONOTONIC)
	RcvNxt uint32 // rcv_nxt, or the low 32 bits of bytes received
	AdvMSS uint32 // bytes
	RTTUS  uint32 // receive-side RTT estimate (tcpi_rcv_rtt), 0 = none yet
	OOO    uint32 // out-of-order segments received (tcpi_rcv_ooopack)
}

// Receiver is one socket's rLEDBAT state (struct rl_state).
type Receiver struct {
	L         State
	Wnd       uint32 // packets, 0 = not started
	Ssthresh  uint32 // packets
	LastNxt   uint32
	Rem       uint32 // bytes received, not yet a whole segment
	LastOOO   uint32
	TLoss     uint32
	LastRTT   uint32
	JoinsSeen uint32 // the host's join count when last looked at
}

// RecvStep is what one step decided.
type RecvStep struct {
	Timed bool // the socket has received timed data (else: leave it alone)
	Loss  bool // a loss halved the window
	MSS   uint32
}

// Step advances the receiver by one sample. joins is the host's count of
// background downloads that started (shared by its receivers, nil: none):
// a new download counts itself; the others slow down at once when it
// changes.
func (r *Receiver) Step(s RecvSample, targetUS uint32, joins *uint32) RecvStep {
	now := uint32(s.NowUS)
	mss := max(s.AdvMSS, RecvMinMSS)
	st := RecvStep{MSS: mss}
	if r.Wnd == 0 {
		r.L = New(targetUS, s.NowUS)
		r.Wnd, r.Ssthresh = RecvInitWnd, SsthreshInfinite
		r.LastNxt, r.LastOOO = s.RcvNxt, s.OOO
	}
	rtt := s.RTTUS
	if rtt != 0 && rtt != r.LastRTT {
		r.L.RTT(rtt, s.NowUS)
		r.LastRTT = rtt
	}
	if r.L.Samples == 0 {
		return st
	}
	st.Timed = true
	if joins != nil {
		if r.L.Samples == 1 && r.JoinsSeen == 0 {
			*joins++
		} else if *joins != r.JoinsSeen {
			r.L.SlowdownNow(now)
		}
		r.JoinsSeen = *joins
	}
	w := Window{Cwnd: r.Wnd, Ssthresh: r.Ssthresh}
	if s.OOO != r.LastOOO {
		r.LastOOO = s.OOO
		span := rtt
		if span == 0 {
			span = 1000
		}
		if r.TLoss == 0 || after(now, r.TLoss+span) {
			w.Ssthresh = r.L.Loss(w.Cwnd, now, rtt)
			w.Cwnd = w.Ssthresh
			r.TLoss = now
			st.Loss = true
		}
	}
	r.Rem += s.RcvNxt - r.LastNxt
	r.LastNxt = s.RcvNxt
	if r.Rem >= mss {
		pk := r.Rem / mss
		r.Rem -= pk * mss
		r.L.Ack(&w, pk, now, rtt, true)
	}
	r.Wnd, r.Ssthresh = min(w.Cwnd, RecvMaxWnd), w.Ssthresh
	return st
}

// RecvClamp is the TCP_WINDOW_CLAMP rLEDBAT applies: wnd packets of mss
// bytes, no more than capBytes (the cooperative controller's downlink cap,
// 0 = none), and MinCwnd packets while the foreground yield holds the
// socket.
func RecvClamp(wnd, mss, capBytes uint32, yield bool) uint32 {
	c := wnd * mss
	if capBytes != 0 && capBytes < c {
		c = capBytes
	}
	if yield {
		c = min(c, MinCwnd*mss)
	}
	return c
}
