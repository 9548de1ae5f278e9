//! rt_echo: examples/rt-echo in Rust (the lanes-rt crate only), an
//! application that keeps its own UDP socket and sends through the lanes
//! realtime lane.
//!
//!     rt_echo ADDR PORT COUNT DEADLINE_US
//!
//! Connects a UDP socket (IPv4 or IPv6) to an echo server at ADDR PORT,
//! hands it to the daemon once (attach), then sends COUNT requests, one
//! every millisecond, each with a deadline DEADLINE_US from its send call;
//! the daemon admits or refuses each at once and sends the admitted ones
//! from this socket, so the echoes come back to it. Prints
//!
//!     sent N admitted A refused R replies Y
//!
//! then `refused REASON COUNT` per reason of the refusals, and on stderr its
//! socket's local port. The daemon's socket: LANES_RT_SOCKET, or
//! /run/lanes/rt.sock.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::exit;
use std::time::{Duration, Instant};

/// Reads echoes until `until`, or with `all` until every admitted request
/// has its echo (state per request: 1 admitted, 2 echoed).
fn read_echoes(udp: &UdpSocket, state: &mut [u8], admitted: usize, replies: &mut usize, until: Instant, all: bool) {
    let mut buf = [0u8; 64];
    loop {
        if all && *replies == admitted {
            return;
        }
        let now = Instant::now();
        if now >= until {
            return;
        }
        udp.set_read_timeout(Some(until - now)).expect("read timeout");
        match udp.recv(&mut buf) {
            Ok(n) if n >= 4 => {
                let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                if seq < state.len() && state[seq] == 1 {
                    state[seq] = 2;
                    *replies += 1;
                }
            }
            Ok(_) => {}
            Err(_) => return, // timed out
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: {} ADDR PORT COUNT DEADLINE_US", args[0]);
        exit(2);
    }
    let addr: IpAddr = args[1].parse().expect("ADDR");
    let server = SocketAddr::new(addr, args[2].parse().expect("PORT"));
    let count: usize = args[3].parse().expect("COUNT");
    let deadline = Duration::from_micros(args[4].parse().expect("DEADLINE_US"));
    let udp = UdpSocket::bind(if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).expect("bind");
    udp.connect(server).expect("connect");
    eprintln!("rt_echo: local port {}", udp.local_addr().expect("local address").port());
    let mut rt = match lanes_rt::Client::connect(lanes_rt::socket_path()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rt_echo: {}", e);
            exit(1);
        }
    };
    match rt.attach(&udp) {
        Ok(_) => {}
        Err(lanes_rt::Error::Refused { reason, .. }) => {
            eprintln!("rt_echo: attach refused: {}", reason.help().map_or(reason.to_string(), String::from));
            exit(1);
        }
        Err(e) => {
            eprintln!("rt_echo: {}", e);
            exit(1);
        }
    }
    let mut state = vec![0u8; count];
    let (mut admitted, mut replies) = (0, 0);
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut next = Instant::now();
    for seq in 0..count {
        let mut payload = [0u8; 64];
        payload[..4].copy_from_slice(&(seq as u32).to_be_bytes());
        match rt.send_within(1, None, deadline, &payload) {
            Ok(res) if res.admitted => {
                state[seq] = 1;
                admitted += 1;
            }
            Ok(res) => *refused.entry(res.reason.to_string()).or_insert(0) += 1,
            Err(e) => {
                eprintln!("rt_echo: send: {}", e);
                exit(1);
            }
        }
        next += Duration::from_millis(1);
        read_echoes(&udp, &mut state, admitted, &mut replies, next, false);
    }
    read_echoes(&udp, &mut state, admitted, &mut replies, Instant::now() + Duration::from_secs(1), true);
    println!("sent {} admitted {} refused {} replies {}", count, admitted, count - admitted, replies);
    for (reason, n) in &refused {
        println!("refused {} {}", reason, n);
    }
}
