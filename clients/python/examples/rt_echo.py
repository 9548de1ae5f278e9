#!/usr/bin/env python3
"""rt_echo.py: an application that keeps its own UDP socket and sends
through the lanes realtime lane (the lanes_rt package only).

    rt_echo.py ADDR PORT COUNT DEADLINE_US

Connects a UDP socket (IPv4 or IPv6) to an echo server at ADDR PORT, hands
it to the daemon once (attach), then sends COUNT requests, one every
millisecond, each with a deadline DEADLINE_US from its send call; the
daemon admits or refuses each at once and sends the admitted ones from
this socket, so the echoes come back to it. Prints

    sent N admitted A refused R replies Y

then `refused REASON COUNT` per reason of the refusals, and on stderr its
socket's local port. The daemon's socket: LANES_RT_SOCKET, or
/run/lanes/rt.sock. (examples/rt-echo is the same application in C.)
"""

import collections
import select
import socket
import struct
import sys
import time

import lanes_rt


def read_echoes(udp, admitted, until_ns, want_all):
    """Reads echoes until the monotonic time until_ns, or with want_all
    until every admitted request has its echo; returns the count read."""
    got = 0
    while not (want_all and all(v == 2 for v in admitted.values())):
        left = until_ns - lanes_rt.now()
        if left <= 0 or not select.select([udp], [], [], left / 1e9)[0]:
            break
        msg = udp.recv(64)
        seq = struct.unpack_from(">I", msg)[0] if len(msg) >= 4 else -1
        if admitted.get(seq) == 1:
            admitted[seq] = 2
            got += 1
    return got


def main(argv):
    if len(argv) != 5:
        sys.stderr.write("usage: %s ADDR PORT COUNT DEADLINE_US\n" % argv[0])
        return 2
    addr, port, count, deadline_us = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    udp = socket.socket(family, socket.SOCK_DGRAM)
    udp.connect((addr, port))
    sys.stderr.write("rt_echo: local port %d\n" % udp.getsockname()[1])
    try:
        client = lanes_rt.Client()
    except lanes_rt.Unavailable as e:
        sys.stderr.write("rt_echo: %s\n" % e)
        return 1
    with client as rt:
        try:
            rt.attach(udp)
        except lanes_rt.Refused as e:
            sys.stderr.write("rt_echo: attach refused: %s\n" % (lanes_rt.help_for(e.reason) or e.reason))
            return 1
        admitted, refused, replies = {}, collections.Counter(), 0
        next_ns = lanes_rt.now()
        for seq in range(count):
            payload = struct.pack(">I", seq).ljust(64, b"\0")
            res = rt.send_within(1, payload, deadline_us / 1e6)
            if res.admitted:
                admitted[seq] = 1
            else:
                refused[str(res.reason)] += 1
            next_ns += 1_000_000
            replies += read_echoes(udp, admitted, next_ns, False)
        replies += read_echoes(udp, admitted, lanes_rt.now() + 1_000_000_000, True)
        print("sent %d admitted %d refused %d replies %d" % (count, len(admitted), sum(refused.values()), replies))
        for reason in sorted(refused):
            print("refused %s %d" % (reason, refused[reason]))
    udp.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
