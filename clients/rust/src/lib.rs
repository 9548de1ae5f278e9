// SPDX-License-Identifier: Apache-2.0 OR BSD-2-Clause
//! Client of the lanes realtime lane.
//!
//! Hands UDP datagrams with deadlines to the lanes daemon over its unix
//! `SOCK_SEQPACKET` socket and returns the daemon's immediate decision:
//! admitted (sent by its deadline, or reported dropped later in a notice)
//! or refused, with a [`Reason`]. The application hands the daemon its own
//! UDP socket once ([`Client::attach`]); its datagrams then leave from that
//! socket, so the receiver sees the application's address and port and the
//! replies come back to it. Wire format: docs/realtime.md (version 1,
//! big-endian), the same as include/lanes_rt.h (C), the Go package rt and
//! the Python package lanes_rt.
//!
//! ```no_run
//! use std::{net::UdpSocket, time::Duration};
//! # fn main() -> Result<(), lanes_rt::Error> {
//! let udp = UdpSocket::bind("0.0.0.0:0")?;
//! udp.connect("10.77.0.2:9000")?;
//! let mut rt = lanes_rt::Client::connect(lanes_rt::socket_path())?;
//! rt.attach(&udp)?;
//! let res = rt.send_within(7, None, Duration::from_millis(1), b"payload")?; // instead of udp.send
//! if !res.admitted {
//!     eprintln!("refused: {}", res.reason);
//! }
//! let mut reply = [0u8; 1500];
//! udp.recv(&mut reply)?; // replies, as before
//! # Ok(())
//! # }
//! ```
//!
//! The standard library only: the few system calls it lacks (a
//! `SOCK_SEQPACKET` socket, `sendmsg` with `SCM_RIGHTS`, `clock_gettime`)
//! are declared here against the C library std already links (Linux).

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::raw::{c_int, c_long, c_void};
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The daemon's default realtime socket.
pub const DEFAULT_SOCKET: &str = "/run/lanes/rt.sock";
/// The largest datagram payload (UDP over IPv4).
pub const MAX_PAYLOAD: usize = 65507;
/// Sockets one connection may attach.
pub const MAX_SOCKS: u16 = 8;
/// The socket number of the daemon's own UDP socket.
pub const DAEMON_SOCKET: u16 = 0;
/// A deadline farther than this (ns) from the request's receipt is refused
/// `Reason::BAD_DEADLINE`.
pub const DEADLINE_HORIZON_NS: u64 = 60_000_000_000;

const VERSION: u8 = 1;
const REQUEST_SIZE: usize = 40;
const REPLY_SIZE: usize = 32;
const MAX_REPLY: usize = 32 + 60 * 1024;
const SEND: u8 = 0x01;
const STATS: u8 = 0x02;
const ATTACH: u8 = 0x03;
const ADMIT: u8 = 0x81;
const DROPPED: u8 = 0x83;
const ERROR: u8 = 0x84;
const STATS_OK: u8 = 0x85;
const ATTACHED: u8 = 0x86;
const FLAG_RELATIVE: u8 = 0x01;

/// Why the daemon refused or dropped a datagram; `Display` gives its wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason(pub u8);

impl Reason {
    pub const NONE: Reason = Reason(0);
    /// Would make an admitted datagram late.
    pub const DISPLACES: Reason = Reason(1);
    /// Cannot itself be sent by its deadline.
    pub const OWN_DEADLINE: Reason = Reason(2);
    /// The policy grants this uid no realtime lane.
    pub const NOT_GRANTED: Reason = Reason(3);
    pub const MALFORMED: Reason = Reason(4);
    pub const QUEUE_FULL: Reason = Reason(5);
    pub const BAD_DEST: Reason = Reason(6);
    pub const TOO_BIG: Reason = Reason(7);
    /// (notice) Its deadline could no longer be met at release.
    pub const LATE: Reason = Reason(8);
    /// (notice) The kernel refused the datagram.
    pub const SEND_ERROR: Reason = Reason(9);
    /// (notice) The daemon stopped with it queued.
    pub const SHUTDOWN: Reason = Reason(10);
    pub const DISABLED: Reason = Reason(11);
    /// Too many connections: the daemon closes this one.
    pub const BUSY: Reason = Reason(12);
    /// Not a UDP socket of the daemon's namespace, or no such number.
    pub const BAD_SOCKET: Reason = Reason(13);
    /// (attach) MAX_SOCKS attached already.
    pub const TOO_MANY_SOCKETS: Reason = Reason(14);
    /// (attach) The kernel lacks per-datagram priorities (Linux 6.14+).
    pub const UNSUPPORTED: Reason = Reason(15);
    /// The deadline lies more than DEADLINE_HORIZON_NS from receipt.
    pub const BAD_DEADLINE: Reason = Reason(16);
    /// This connection or uid holds its share of the queue or the link's time.
    pub const OVER_SHARE: Reason = Reason(17);
}

/// What a client says when it cannot use the lane, each naming what fixes
/// it: the words of lanes_rt.h's `LANES_RT_MSG_*` (the one table; the
/// repository's examples/reasons_test.go checks them).
pub const MSG_LANE_OFF: &str = "the realtime lane is off: set realtime.enabled: true in /etc/lanes/policy.yaml, \
then reload the daemon (systemctl reload lanes)";
/// The daemon is not running (see [`MSG_LANE_OFF`]).
pub const MSG_NO_DAEMON: &str = "the daemon is not running: start it (systemctl start lanes)";
/// The caller is not granted the lane (see [`MSG_LANE_OFF`]).
pub const MSG_NOT_GRANTED: &str = "not granted: add the uid, or a group of it, to realtime.grants in \
/etc/lanes/policy.yaml, then reload the daemon";

/// The daemon's API socket, beside the realtime socket.
const API_SOCKET_NAME: &str = "lanes.sock";

impl Reason {
    /// What fixes a refusal of this reason, or None when nothing in the
    /// policy does.
    pub fn help(self) -> Option<&'static str> {
        match self {
            Reason::NOT_GRANTED => Some(MSG_NOT_GRANTED),
            Reason::DISABLED => Some(MSG_LANE_OFF),
            _ => None,
        }
    }
}

const REASON_NAMES: [&str; 18] = [
    "none", "would-make-others-late", "own-deadline-unmeetable", "not-granted", "malformed",
    "queue-full", "bad-destination", "too-big", "late-at-release", "send-error", "shutdown",
    "disabled", "too-many-connections", "bad-socket", "too-many-sockets", "unsupported",
    "deadline-out-of-range", "over-share",
];

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match REASON_NAMES.get(self.0 as usize) {
            Some(name) => f.write_str(name),
            None => write!(f, "reason-{}", self.0),
        }
    }
}

/// The daemon's answer to one datagram.
#[derive(Clone, Copy, Debug)]
pub struct SendResult {
    pub admitted: bool,
    /// Why it was refused (`Reason::NONE` when admitted).
    pub reason: Reason,
    /// Realtime queue length after the decision.
    pub depth: u32,
    /// How much the whole queue may still slip (ns).
    pub slack_ns: i64,
    /// CLOCK_MONOTONIC ns of the decision ([`now`]'s clock).
    pub time_ns: u64,
}

/// An admitted datagram that was not sent (dropped later).
#[derive(Clone, Copy, Debug)]
pub struct Notice {
    pub flow: u32,
    pub seq: u32,
    pub reason: Reason,
    pub time_ns: u64,
}

/// An error of the client.
#[derive(Debug)]
pub enum Error {
    /// A system call failed, or the daemon closed the connection.
    Io(io::Error),
    /// The daemon refused a request as a whole: an attach ("attach"), or an
    /// ERROR reply ("send", "stats").
    Refused { op: &'static str, reason: Reason },
    /// No realtime socket to connect to at `path`: `why` is
    /// [`MSG_LANE_OFF`] (the daemon's API socket beside it answers) or
    /// [`MSG_NO_DAEMON`]; `err` is the connect's.
    Unavailable { why: &'static str, path: PathBuf, err: io::Error },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "realtime lane: {}", e),
            Error::Refused { op, reason } => match reason.help() {
                Some(h) => write!(f, "realtime lane: {} refused: {}", op, h),
                None => write!(f, "realtime lane: {} refused: {}", op, reason),
            },
            Error::Unavailable { why, path, err } => write!(f, "{} ({}: {})", why, path.display(), err),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

#[repr(C)]
struct Timespec {
    tv_sec: c_long,
    tv_nsec: c_long,
}

#[repr(C)]
struct IoVec {
    base: *const c_void,
    len: usize,
}

// struct msghdr and struct cmsghdr of Linux (glibc; musl's equal on
// little-endian machines).
#[repr(C)]
struct MsgHdr {
    name: *mut c_void,
    namelen: u32,
    iov: *const IoVec,
    iovlen: usize,
    control: *mut c_void,
    controllen: usize,
    flags: c_int,
}

extern "C" {
    fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    fn sendmsg(fd: c_int, msg: *const MsgHdr, flags: c_int) -> isize;
    fn clock_gettime(clock: c_int, ts: *mut Timespec) -> c_int;
}

const AF_UNIX: c_int = 1;
const SOCK_SEQPACKET: c_int = 5;
const SOCK_CLOEXEC: c_int = 0o2000000;
const SOL_SOCKET: c_int = 1;
const SCM_RIGHTS: c_int = 1;
const MSG_NOSIGNAL: c_int = 0x4000;
const CLOCK_MONOTONIC: c_int = 1;

/// CLOCK_MONOTONIC in ns, the clock of absolute deadlines.
pub fn now() -> u64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid struct timespec for the call to fill.
    let rc = unsafe { clock_gettime(CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The environment's `LANES_RT_SOCKET`, or [`DEFAULT_SOCKET`].
pub fn socket_path() -> PathBuf {
    match std::env::var_os("LANES_RT_SOCKET") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(DEFAULT_SOCKET),
    }
}

/// One connection to the daemon's realtime socket. Not for concurrent use
/// (`&mut self`): one request is in flight at a time.
pub struct Client {
    sock: UnixDatagram, // a connected SOCK_SEQPACKET socket
    seq: u32,
    attached: u16,
    out: Vec<u8>,
    input: Vec<u8>,
    notices: Vec<Notice>,
}

impl Client {
    /// Connects to the daemon's realtime socket ([`socket_path`], usually);
    /// without one, `Error::Unavailable` says whether the lane is off or the
    /// daemon is not running.
    pub fn connect<P: AsRef<Path>>(path: P) -> Result<Client, Error> {
        // SAFETY: plain system call; the descriptor is owned at once.
        let fd = unsafe { socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: fd is a fresh descriptor nothing else owns. UnixDatagram's
        // connect, send and recv are the plain system calls, which a
        // SOCK_SEQPACKET socket takes as they are.
        let sock = unsafe { UnixDatagram::from_raw_fd(fd) };
        if let Err(err) = sock.connect(path.as_ref()) {
            if err.kind() != io::ErrorKind::NotFound && err.kind() != io::ErrorKind::ConnectionRefused {
                return Err(err.into());
            }
            let api = path.as_ref().parent().unwrap_or_else(|| Path::new("")).join(API_SOCKET_NAME);
            let why = if UnixStream::connect(api).is_ok() { MSG_LANE_OFF } else { MSG_NO_DAEMON };
            return Err(Error::Unavailable { why, path: path.as_ref().to_path_buf(), err });
        }
        Ok(Client { sock, seq: 0, attached: DAEMON_SOCKET, out: Vec::new(), input: vec![0; MAX_REPLY], notices: Vec::new() })
    }

    /// Hands the daemon the UDP socket `udp` (IPv4 or IPv6, connected or
    /// not, of the daemon's network namespace) and makes it the socket
    /// `send`, `send_within` and `send_relative` send from. The daemon keeps
    /// a duplicate until this Client is dropped; `udp` stays the
    /// application's (its replies arrive there). Returns the socket's
    /// number (1..8); a refusal is `Error::Refused` (not-granted, ...).
    pub fn attach<S: AsRawFd>(&mut self, udp: &S) -> Result<u16, Error> {
        self.header(ATTACH, 0, 0, 0, 0, None);
        self.write_with_fd(udp.as_raw_fd())?;
        let rep = self.read_reply(0)?;
        if rep.kind != ATTACHED {
            return Err(Error::Refused { op: "attach", reason: rep.reason });
        }
        self.attached = rep.sock as u16;
        Ok(self.attached)
    }

    /// Hands one datagram with an absolute deadline ([`now`] ns, by which
    /// its transmission must be complete) to the daemon, from the attached
    /// socket (or the daemon's, before any attach). `dst` None sends to the
    /// peer of the attached connected socket.
    pub fn send(&mut self, flow: u32, dst: Option<SocketAddr>, deadline_ns: u64, payload: &[u8]) -> Result<SendResult, Error> {
        let sock = self.attached;
        self.send_on(sock, flow, dst, deadline_ns, payload)
    }

    /// `send` from socket `sock` (DAEMON_SOCKET, or a number attach returned).
    pub fn send_on(&mut self, sock: u16, flow: u32, dst: Option<SocketAddr>, deadline_ns: u64, payload: &[u8]) -> Result<SendResult, Error> {
        self.datagram(0, sock, flow, dst, deadline_ns, payload)
    }

    /// `send` with a deadline `within` from now (taken before the request
    /// is written, so the socket hop counts against it).
    pub fn send_within(&mut self, flow: u32, dst: Option<SocketAddr>, within: Duration, payload: &[u8]) -> Result<SendResult, Error> {
        self.send(flow, dst, now() + within.as_nanos() as u64, payload)
    }

    /// `send` with a deadline of `us` microseconds after the daemon receives it.
    pub fn send_relative(&mut self, flow: u32, dst: Option<SocketAddr>, us: u64, payload: &[u8]) -> Result<SendResult, Error> {
        let sock = self.attached;
        self.datagram(FLAG_RELATIVE, sock, flow, dst, us, payload)
    }

    /// The daemon's counters as JSON (what `lanes rt stats --json` prints).
    pub fn stats(&mut self) -> Result<String, Error> {
        let seq = self.header(STATS, 0, 0, 0, 0, None);
        self.sock.send(&self.out)?;
        let rep = self.read_reply(seq)?;
        if rep.kind != STATS_OK {
            return Err(Error::Refused { op: "stats", reason: rep.reason });
        }
        Ok(String::from_utf8_lossy(&self.input[REPLY_SIZE..rep.len]).into_owned())
    }

    /// Returns and forgets the drop notices received so far, after reading
    /// any waiting on the socket without blocking.
    pub fn notices(&mut self) -> Result<Vec<Notice>, Error> {
        self.sock.set_nonblocking(true)?;
        let mut res = Ok(());
        loop {
            match self.sock.recv(&mut self.input) {
                Ok(n) if n >= REPLY_SIZE => {
                    let rep = parse(&self.input[..n]);
                    if rep.kind == DROPPED {
                        self.notices.push(rep.notice());
                    }
                }
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        self.sock.set_nonblocking(false)?;
        res?;
        Ok(std::mem::take(&mut self.notices))
    }

    fn datagram(&mut self, flags: u8, sock: u16, flow: u32, dst: Option<SocketAddr>, deadline: u64, payload: &[u8]) -> Result<SendResult, Error> {
        if payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "payload above 65507 bytes").into());
        }
        let seq = self.header(SEND, flags, sock, flow, deadline, dst);
        self.out.extend_from_slice(payload);
        self.sock.send(&self.out)?;
        let rep = self.read_reply(seq)?;
        if rep.kind == ERROR {
            return Err(Error::Refused { op: "send", reason: rep.reason });
        }
        Ok(SendResult { admitted: rep.kind == ADMIT, reason: rep.reason, depth: rep.depth, slack_ns: rep.slack, time_ns: rep.time })
    }

    /// Fills `out` with a request header and returns its seq. An attach goes
    /// with seq 0, so that datagrams are numbered 1, 2, ... either way.
    fn header(&mut self, kind: u8, flags: u8, sock: u16, flow: u32, deadline: u64, dst: Option<SocketAddr>) -> u32 {
        let seq = if kind == ATTACH {
            0
        } else {
            self.seq = self.seq.wrapping_add(1);
            self.seq
        };
        let mut h = [0u8; REQUEST_SIZE];
        h[0] = VERSION;
        h[1] = kind;
        h[2] = flags;
        h[4..8].copy_from_slice(&flow.to_be_bytes());
        h[8..12].copy_from_slice(&seq.to_be_bytes());
        h[14..16].copy_from_slice(&sock.to_be_bytes());
        h[16..24].copy_from_slice(&deadline.to_be_bytes());
        if let Some(d) = dst {
            h[12..14].copy_from_slice(&d.port().to_be_bytes());
            match d.ip() {
                IpAddr::V4(a) => {
                    h[3] = 4;
                    h[24..28].copy_from_slice(&a.octets());
                }
                IpAddr::V6(a) => {
                    h[3] = 6;
                    h[24..40].copy_from_slice(&a.octets());
                }
            }
        }
        self.out.clear();
        self.out.extend_from_slice(&h);
        seq
    }

    /// Writes `out` with the descriptor fd in an SCM_RIGHTS control message.
    fn write_with_fd(&mut self, fd: c_int) -> Result<(), Error> {
        const W: usize = std::mem::size_of::<usize>();
        let align = |n: usize| (n + W - 1) & !(W - 1);
        let hdr = align(std::mem::size_of::<usize>() + 2 * std::mem::size_of::<c_int>());
        let space = hdr + align(std::mem::size_of::<c_int>());
        let mut control = vec![0usize; space / W]; // usize-aligned
        // SAFETY: control holds space bytes: the cmsghdr (len, level,
        // type) then the descriptor at the aligned data offset.
        unsafe {
            let p = control.as_mut_ptr() as *mut u8;
            *(p as *mut usize) = hdr + std::mem::size_of::<c_int>();
            *(p.add(W) as *mut c_int) = SOL_SOCKET;
            *(p.add(W + 4) as *mut c_int) = SCM_RIGHTS;
            *(p.add(hdr) as *mut c_int) = fd;
        }
        let iov = IoVec { base: self.out.as_ptr() as *const c_void, len: self.out.len() };
        let msg = MsgHdr { name: std::ptr::null_mut(), namelen: 0, iov: &iov, iovlen: 1,
            control: control.as_mut_ptr() as *mut c_void, controllen: space, flags: 0 };
        loop {
            // SAFETY: msg points at live buffers for the call's duration.
            if unsafe { sendmsg(self.sock.as_raw_fd(), &msg, MSG_NOSIGNAL) } >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e.into());
            }
        }
    }

    /// Reads until the reply of seq, keeping notices on the way.
    fn read_reply(&mut self, seq: u32) -> Result<Reply, Error> {
        loop {
            let n = self.sock.recv(&mut self.input)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection closed").into());
            }
            if n < REPLY_SIZE || self.input[0] != VERSION {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed reply").into());
            }
            let rep = parse(&self.input[..n]);
            if rep.kind == DROPPED {
                self.notices.push(rep.notice());
            } else if rep.seq == seq || (rep.kind == ERROR && rep.seq == 0) {
                return Ok(rep);
            }
        }
    }
}

struct Reply {
    kind: u8,
    reason: Reason,
    sock: u8,
    flow: u32,
    seq: u32,
    depth: u32,
    slack: i64,
    time: u64,
    len: usize,
}

impl Reply {
    fn notice(&self) -> Notice {
        Notice { flow: self.flow, seq: self.seq, reason: self.reason, time_ns: self.time }
    }
}

fn parse(b: &[u8]) -> Reply {
    let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64_at = |i: usize| (u32_at(i) as u64) << 32 | u32_at(i + 4) as u64;
    Reply { kind: b[1], reason: Reason(b[2]), sock: b[3], flow: u32_at(4), seq: u32_at(8), depth: u32_at(12),
        slack: u64_at(16) as i64, time: u64_at(24), len: b.len() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names() {
        assert_eq!(Reason::NOT_GRANTED.to_string(), "not-granted");
        assert_eq!(Reason::UNSUPPORTED.to_string(), "unsupported");
        assert_eq!(Reason::OVER_SHARE.to_string(), "over-share");
        assert_eq!(Reason(200).to_string(), "reason-200");
    }

    #[test]
    fn request_header() {
        let fd = unsafe { socket(AF_UNIX, SOCK_SEQPACKET, 0) };
        let mut c = Client { sock: unsafe { UnixDatagram::from_raw_fd(fd) }, seq: 0, attached: 0, out: Vec::new(),
            input: Vec::new(), notices: Vec::new() };
        let seq = c.header(SEND, FLAG_RELATIVE, 2, 7, 0x0102030405060708, Some("[fd00::1]:9000".parse().unwrap()));
        assert_eq!(seq, 1);
        let h = &c.out;
        assert_eq!(&h[..16], &[1, SEND, 1, 6, 0, 0, 0, 7, 0, 0, 0, 1, 0x23, 0x28, 0, 2]);
        assert_eq!(&h[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&h[24..26], &[0xfd, 0]);
        assert_eq!(h[39], 1);
    }

    #[test]
    fn connect_says_what_fixes_it() {
        let dir = std::env::temp_dir().join(format!("lanes-rt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("rt.sock");
        let no_daemon = Client::connect(&sock).err().expect("connected to nothing");
        let api = std::os::unix::net::UnixListener::bind(dir.join(API_SOCKET_NAME)).unwrap();
        let off = Client::connect(&sock).err().expect("connected to nothing");
        drop(api);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(no_daemon.to_string().starts_with(MSG_NO_DAEMON), "{}", no_daemon);
        assert!(off.to_string().starts_with(MSG_LANE_OFF), "{}", off);
        let refused = Error::Refused { op: "attach", reason: Reason::NOT_GRANTED };
        assert!(refused.to_string().contains("realtime.grants"), "{}", refused);
    }

    #[test]
    fn monotonic() {
        let a = now();
        assert!(now() >= a);
    }
}
