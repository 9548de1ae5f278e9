# SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause)
"""Client of the lanes realtime lane.

Hands UDP datagrams with deadlines to the lanes daemon over its unix
SOCK_SEQPACKET socket and returns the daemon's immediate decision: admitted
(sent by its deadline, or reported dropped later in a notice) or refused,
with a Reason. The application hands the daemon its own UDP socket once
(Client.attach); its datagrams then leave from that socket, so the
receiver sees the application's address and port and the replies come
back to it. Wire format: docs/realtime.md (version 1, big-endian), the
same as include/lanes_rt.h (C) and the Go package rt.

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect(("10.77.0.2", 9000))
    with lanes_rt.Client() as rt:
        rt.attach(udp)
        res = rt.send_within(7, payload, 0.001)   # instead of udp.send(payload)
        if not res.admitted: ... res.reason ...
        udp.recv(1500)                            # replies, as before

A Client is one connection; its methods are safe to call from several
threads (one request is in flight at a time).
"""

import enum
import ipaddress
import json
import os
import socket
import struct
import threading
import time
from array import array
from typing import List, NamedTuple, Optional, Tuple

__all__ = ["Client", "Reason", "Result", "Notice", "Refused", "Unavailable", "now", "socket_path",
           "help_for", "MSG_LANE_OFF", "MSG_NO_DAEMON", "MSG_NOT_GRANTED", "DEFAULT_SOCKET", "DAEMON_SOCKET", "MAX_PAYLOAD", "MAX_SOCKS", "DEADLINE_HORIZON_NS"]

DEFAULT_SOCKET = "/run/lanes/rt.sock"
VERSION = 1
MAX_PAYLOAD = 65507
MAX_SOCKS = 8
MAX_REPLY = 32 + 60 * 1024
DEADLINE_HORIZON_NS = 60_000_000_000  # a deadline farther from receipt is refused BAD_DEADLINE
DAEMON_SOCKET = 0  # sock number of the daemon's own UDP socket

# What a client says when it cannot use the lane, each naming what fixes
# it: the words of lanes_rt.h's LANES_RT_MSG_* (the one table; the
# repository's examples/reasons_test.go checks them).
MSG_LANE_OFF = ("the realtime lane is off: set realtime.enabled: true in /etc/lanes/policy.yaml, "
                "then reload the daemon (systemctl reload lanes)")
MSG_NO_DAEMON = "the daemon is not running: start it (systemctl start lanes)"
MSG_NOT_GRANTED = ("not granted: add the uid, or a group of it, to realtime.grants in "
                   "/etc/lanes/policy.yaml, then reload the daemon")
_API_SOCKET_NAME = "lanes.sock"  # the daemon's API socket, beside the realtime socket

_SEND, _STATS, _ATTACH = 0x01, 0x02, 0x03
_ADMIT, _REJECT, _DROPPED, _ERROR, _STATS_OK, _ATTACHED = 0x81, 0x82, 0x83, 0x84, 0x85, 0x86
_FLAG_RELATIVE = 0x01

# version type flags family flow seq dport sock deadline daddr(16)
_REQUEST = struct.Struct(">BBBBIIHHQ16s")
# version type reason sock flow seq depth slack time
_REPLY = struct.Struct(">BBBBIIIqQ")


class Reason(enum.IntEnum):
    """Why the daemon refused or dropped a datagram; str() is its wire name."""
    NONE = 0
    DISPLACES = 1          # would make an admitted datagram late
    OWN_DEADLINE = 2       # cannot itself be sent by its deadline
    NOT_GRANTED = 3        # the policy grants this uid no realtime lane
    MALFORMED = 4
    QUEUE_FULL = 5
    BAD_DEST = 6
    TOO_BIG = 7
    LATE = 8               # (notice) its deadline could no longer be met at release
    SEND_ERROR = 9         # (notice) the kernel refused the datagram
    SHUTDOWN = 10          # (notice) the daemon stopped with it queued
    DISABLED = 11
    BUSY = 12              # too many connections: the daemon closes this one
    BAD_SOCKET = 13        # not a UDP socket of the daemon's namespace, or no such number
    TOO_MANY_SOCKETS = 14  # (attach) MAX_SOCKS attached already
    UNSUPPORTED = 15       # (attach) the kernel lacks per-datagram priorities (6.14+)
    BAD_DEADLINE = 16      # the deadline lies more than DEADLINE_HORIZON_NS from receipt
    OVER_SHARE = 17        # this connection or uid holds its share of the queue or the link's time

    def __str__(self):
        return _REASON_NAMES[self]


_REASON_NAMES = [
    "none", "would-make-others-late", "own-deadline-unmeetable", "not-granted", "malformed",
    "queue-full", "bad-destination", "too-big", "late-at-release", "send-error", "shutdown",
    "disabled", "too-many-connections", "bad-socket", "too-many-sockets", "unsupported",
    "deadline-out-of-range", "over-share",
]


def _reason(code: int):
    """Reason(code), or the bare int for a code this client does not know."""
    try:
        return Reason(code)
    except ValueError:
        return code


class Result(NamedTuple):
    """The daemon's answer to one datagram."""
    admitted: bool
    reason: Reason   # why it was refused (Reason.NONE when admitted)
    depth: int       # realtime queue length after the decision
    slack_ns: int    # how much the whole queue may still slip
    time_ns: int     # CLOCK_MONOTONIC ns of the decision


class Notice(NamedTuple):
    """An admitted datagram that was not sent (dropped later)."""
    flow: int
    seq: int
    reason: Reason
    time_ns: int


def help_for(reason) -> Optional[str]:
    """What fixes a refusal of this reason, or None when nothing in the
    policy does."""
    if reason == Reason.NOT_GRANTED:
        return MSG_NOT_GRANTED
    if reason == Reason.DISABLED:
        return MSG_LANE_OFF
    return None


class Refused(Exception):
    """A request refused as a whole: an attach, or an ERROR reply."""

    def __init__(self, op: str, reason):
        super().__init__("realtime lane: %s refused: %s" % (op, help_for(reason) or reason))
        self.op = op
        self.reason = reason


class Unavailable(OSError):
    """No realtime socket to connect to: the lane is off (the daemon's API
    socket beside it answers) or the daemon is not running. str() says
    which, and what fixes it; errno is the connect's."""

    def __init__(self, err: OSError, path: str):
        api = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            api.connect(os.path.join(os.path.dirname(path), _API_SOCKET_NAME))
            msg = MSG_LANE_OFF
        except OSError:
            msg = MSG_NO_DAEMON
        finally:
            api.close()
        super().__init__(err.errno, msg, path)

    def __str__(self):
        return "%s (%s: %s)" % (self.strerror, self.filename, os.strerror(self.errno))


def now() -> int:
    """CLOCK_MONOTONIC in ns, the clock of absolute deadlines."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def socket_path() -> str:
    """The environment's LANES_RT_SOCKET, or DEFAULT_SOCKET."""
    return os.environ.get("LANES_RT_SOCKET") or DEFAULT_SOCKET


def _destination(dst: Optional[Tuple[str, int]]) -> Tuple[int, bytes, int]:
    """(family, 16 address bytes, port) of a (host, port) or None."""
    if dst is None:
        return 0, bytes(16), 0
    addr = ipaddress.ip_address(dst[0])
    family = 4 if addr.version == 4 else 6
    return family, addr.packed.ljust(16, b"\0"), int(dst[1])


class Client:
    """One connection to the daemon's realtime socket."""

    def __init__(self, path: Optional[str] = None):
        path = path or socket_path()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            self._sock.close()
            raise Unavailable(e, path) from None
        except OSError:
            self._sock.close()
            raise
        self._lock = threading.Lock()
        self._seq = 0
        self._attached = DAEMON_SOCKET  # where send, send_within and send_relative send from
        self._notices: List[Notice] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._sock.close()

    def attach(self, udp: socket.socket) -> int:
        """Hands the daemon the UDP socket udp (IPv4 or IPv6, connected or
        not, of the daemon's network namespace) and makes it the socket
        send, send_within and send_relative send from. The daemon keeps a
        duplicate until this Client is closed; udp stays the application's
        (its replies arrive there). Returns the socket's number (1..8);
        raises Refused (reason: not-granted, bad-socket, ...)."""
        fds = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [udp.fileno()]))]
        with self._lock:
            rep = self._round_trip(_ATTACH, 0, 0, 0, 0, None, b"", fds)
            if rep[1] != _ATTACHED:
                raise Refused("attach", _reason(rep[2]))
            self._attached = rep[3]
            return self._attached

    def send(self, flow: int, payload: bytes, deadline_ns: int,
             dst: Optional[Tuple[str, int]] = None, sock: Optional[int] = None) -> Result:
        """Hands one datagram with an absolute deadline (now() ns, by which
        its transmission must be complete) to the daemon. dst is (host,
        port), or None for the peer of the attached connected socket; sock
        is the socket to send from (DAEMON_SOCKET or a number attach
        returned; None: the attached one)."""
        return self._datagram(0, flow, deadline_ns, dst, sock, payload)

    def send_within(self, flow: int, payload: bytes, seconds: float,
                    dst: Optional[Tuple[str, int]] = None, sock: Optional[int] = None) -> Result:
        """send with a deadline seconds from now (taken before the request
        is written, so the socket hop counts against it)."""
        return self.send(flow, payload, now() + int(seconds * 1e9), dst, sock)

    def send_relative(self, flow: int, payload: bytes, us: int,
                      dst: Optional[Tuple[str, int]] = None, sock: Optional[int] = None) -> Result:
        """send with a deadline us microseconds after the daemon receives it."""
        return self._datagram(_FLAG_RELATIVE, flow, us, dst, sock, payload)

    def stats(self) -> dict:
        """The daemon's counters (what `lanes rt stats --json` prints)."""
        with self._lock:
            rep = self._round_trip(_STATS, 0, 0, 0, 0, None, b"", None)
        if rep[1] != _STATS_OK:
            raise Refused("stats", _reason(rep[2]))
        return json.loads(rep[-1])

    def notices(self, poll: bool = True) -> List[Notice]:
        """Returns and forgets the drop notices received so far; with poll
        it first reads any waiting on the socket without blocking."""
        with self._lock:
            while poll:
                try:
                    msg = self._sock.recv(MAX_REPLY, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if not msg:
                    break
                rep = self._parse(msg)
                if rep[1] == _DROPPED:
                    self._notice(rep)
            out, self._notices = self._notices, []
            return out

    def _datagram(self, flags, flow, deadline, dst, sock, payload) -> Result:
        if len(payload) > MAX_PAYLOAD:
            raise ValueError("payload of %d bytes, at most %d" % (len(payload), MAX_PAYLOAD))
        with self._lock:
            rep = self._round_trip(_SEND, flags, flow, deadline,
                                   self._attached if sock is None else sock, dst, payload, None)
        if rep[1] == _ERROR:
            raise Refused("send", _reason(rep[2]))
        return Result(rep[1] == _ADMIT, _reason(rep[2]), rep[6], rep[7], rep[8])

    def _round_trip(self, typ, flags, flow, deadline, sock, dst, payload, fds):
        """Writes one request and reads until its reply, keeping notices;
        the lock held. An attach goes with seq 0, so that datagrams are
        numbered 1, 2, ... whether or not a socket was attached."""
        seq = 0
        if typ != _ATTACH:
            self._seq = (self._seq + 1) & 0xFFFFFFFF
            seq = self._seq
        family, daddr, port = _destination(dst)
        head = _REQUEST.pack(VERSION, typ, flags, family, flow, seq, port, sock, deadline, daddr)
        if fds:
            self._sock.sendmsg([head], fds)
        else:
            self._sock.send(head + bytes(payload))
        while True:
            msg = self._sock.recv(MAX_REPLY)
            if not msg:
                raise ConnectionResetError("realtime lane: connection closed")
            rep = self._parse(msg)
            if rep[1] == _DROPPED:
                self._notice(rep)
            elif rep[5] == seq or (rep[1] == _ERROR and rep[5] == 0):
                return rep

    @staticmethod
    def _parse(msg: bytes):
        """The reply's header fields, then its body."""
        if len(msg) < _REPLY.size or msg[0] != VERSION:
            raise ConnectionError("realtime lane: malformed reply of %d bytes" % len(msg))
        return _REPLY.unpack_from(msg) + (msg[_REPLY.size:],)

    def _notice(self, rep) -> None:
        self._notices.append(Notice(rep[4], rep[5], _reason(rep[2]), rep[8]))
