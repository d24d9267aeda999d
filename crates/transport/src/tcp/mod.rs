//! TCP: a byte stream cut into frames, TCP_NODELAY always.
//!
//! How the stream is cut is the protocol's choice, a [`Framing`]: lowlat's own frames are prefixed
//! with their length ([`LengthPrefix`]: u32, little-endian); ONC RPC's are records of fragments
//! (RFC 5531 record marking, which the runtime's driver plugs in from `lowlat-onc`). This crate
//! knows only how to move them.
//!
//! A client channel is one connection. A server is one thread over many connections: it spins on
//! `epoll_wait(0)` and blocks in `epoll_wait(timeout)`, and never blocks on a write: output that
//! does not fit in the socket is queued per connection and flushed when writable, and a peer that
//! stops reading is disconnected once its queue passes a limit, so it cannot stall the others.
//!
//! Strangers cannot hold a server's connections: an endpoint takes at most
//! [`TcpLimits::max_connections`] at once and [`TcpLimits::max_per_source`] from one IP address,
//! closes a connection its owner has not [`establish`](TcpEndpoint::establish)ed (bound, for
//! lowlat) within [`TcpLimits::establish_within`], and drops connections from outside its
//! allowlist at once. Each limit hit is counted ([`TcpStats`]) and logged at most once per
//! [`LOG_INTERVAL`].
//!
//! [`framing`]: how the stream is cut; [`channel`]: the client's connection; [`server`]: the
//! server's endpoint over many connections; `group`: several endpoints of one address, a thread
//! each, handing connections to one another.

pub mod channel;
pub mod framing;
mod group;
pub mod server;

pub use channel::TcpChannel;
pub use framing::{Framing, LengthPrefix, PREFIX, READ_AHEAD};
pub use server::{ConnId, TcpEndpoint, TcpEvent, TcpLimits, TcpStats, LOG_INTERVAL};

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    fn next_event(ep: &mut TcpEndpoint, out: &mut Vec<u8>) -> TcpEvent {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = ep.try_next(out).unwrap() {
                return e;
            }
            assert!(Instant::now() < deadline, "no event");
            ep.block(Some(Duration::from_millis(50))).unwrap();
        }
    }

    fn recv(ch: &mut TcpChannel, out: &mut Vec<u8>) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if ch.try_recv(out)?.is_some() {
                return Ok(());
            }
            assert!(Instant::now() < deadline, "no frame");
            lowlat_sys::wait_readable(ch, Some(Duration::from_millis(50)))?;
        }
    }

    fn length_prefixed(body: &[u8]) -> Vec<u8> {
        [&(body.len() as u32).to_le_bytes()[..], body].concat()
    }

    #[test]
    fn frames_already_read_are_taken_without_reading_the_socket_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_nonblocking(true).unwrap();
        // One write, one segment: the first read takes both frames.
        peer.write_all(&[length_prefixed(b"one"), length_prefixed(b"two")].concat()).unwrap();
        lowlat_sys::wait_readable(&sock, Some(Duration::from_secs(5))).unwrap();
        let (mut framing, mut out) = (LengthPrefix::new(64), Vec::new());
        assert_eq!(framing.next(&mut sock, &mut out).unwrap(), Some(()));
        assert_eq!(out, b"one");
        assert_eq!(framing.buffered(&mut out).unwrap(), Some(()));
        assert_eq!(out, b"two");
        peer.write_all(&length_prefixed(b"three")).unwrap();
        lowlat_sys::wait_readable(&sock, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(framing.buffered(&mut out).unwrap(), None, "read the socket");
        assert_eq!(framing.next(&mut sock, &mut out).unwrap(), Some(()));
        assert_eq!(out, b"three");
    }

    #[test]
    fn an_endpoint_serves_frames_that_came_together_and_the_one_after() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 1 << 16).unwrap();
        let mut peer = TcpStream::connect(ep.local_addr()).unwrap();
        let mut out = Vec::new();
        peer.write_all(&[length_prefixed(b"one"), length_prefixed(b"two")].concat()).unwrap();
        for want in [&b"one"[..], b"two"] {
            assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Frame(_)));
            assert_eq!(out, want);
        }
        // Nothing more, and the frame written next comes through epoll.
        assert!(ep.try_next(&mut out).unwrap().is_none());
        peer.write_all(&length_prefixed(b"three")).unwrap();
        assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Frame(_)));
        assert_eq!(out, b"three");
    }

    #[test]
    fn frames_cross_in_both_directions_including_large_ones() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 4 << 20).unwrap();
        let mut ch = TcpChannel::connect(ep.local_addr(), 4 << 20, Duration::from_secs(5)).unwrap();
        let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        for body in [&b""[..], b"x", &big[..]] {
            let id = std::thread::scope(|s| {
                s.spawn(|| ch.send(b"HEAD", body).unwrap());
                let ev = next_event(&mut ep, &mut out);
                let TcpEvent::Frame(id) = ev else { panic!("{ev:?}") };
                id
            });
            assert_eq!(&out[..4], b"HEAD");
            assert_eq!(&out[4..], body);
            // The reply may not fit in the socket at once: the endpoint queues it.
            ep.send(&id, b"R", body);
            let mut got = Vec::new();
            std::thread::scope(|s| {
                let h = s.spawn(|| recv(&mut ch, &mut got).unwrap());
                // Keep flushing the queue while the client reads.
                while !h.is_finished() {
                    let _ = ep.try_next(&mut out).unwrap();
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            assert_eq!(got.len(), 1 + body.len());
            assert_eq!(&got[1..], body);
        }
        drop(ch);
        assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Closed(_)));
    }

    /// Fragments of at most 3 bytes whose headers say (length, last), to see a frame split.
    #[derive(Clone)]
    struct Threes;

    impl Framing for Threes {
        fn next(&mut self, _: &mut TcpStream, _: &mut Vec<u8>) -> io::Result<Option<()>> {
            Ok(None)
        }
        fn buffered(&mut self, _: &mut Vec<u8>) -> io::Result<Option<()>> {
            Ok(None)
        }
        fn held(&self) -> usize {
            0
        }
        fn trim(&mut self) {}
        fn max_frame(&self) -> usize {
            0
        }
        fn header(&self, len: usize, last: bool) -> [u8; PREFIX] {
            (len as u32 | (last as u32) << 31).to_le_bytes()
        }
        fn max_fragment(&self) -> usize {
            3
        }
    }

    #[test]
    fn frames_above_the_fragment_size_go_in_several() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut ch =
            TcpChannel::connect_framed(listener.local_addr().unwrap(), Threes, Duration::from_secs(5)).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Fragments cut across the header and the body, and one exactly the fragment size.
        ch.send(b"ab", b"cdefg").unwrap();
        ch.send(b"xyz", b"").unwrap();
        let mut got = vec![0u8; 4 * 4 + 10];
        peer.read_exact(&mut got).unwrap();
        let h = |len: u32, last: bool| (len | (last as u32) << 31).to_le_bytes();
        let want = [&h(3, false)[..], b"abc", &h(3, false), b"def", &h(1, true), b"g", &h(3, true), b"xyz"].concat();
        assert_eq!(got, want);
    }

    #[test]
    fn a_watched_doorbell_hands_control_back() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 100).unwrap();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        ep.watch(a.as_raw_fd()).unwrap();
        (&b).write_all(b"x").unwrap();
        let mut out = Vec::new();
        // The doorbell stays readable: try_next must return rather than loop on it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = ep.try_next(&mut out).map(|e| e.is_none());
            let _ = tx.send(r.unwrap());
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
    }

    /// Read buffers grown for large frames are kept for the next large frame while the
    /// endpoint's connections together hold no more than `max_grown`; past it a connection
    /// gives back what it grew after its frame.
    #[test]
    fn buffers_grown_for_large_frames_are_kept_within_the_limit() {
        let limits = TcpLimits { max_grown: 1 << 20, ..TcpLimits::default() };
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 4 << 20).unwrap().with_limits(limits);
        let big = vec![3u8; 600 << 10];
        let mut peers: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(ep.local_addr()).unwrap()).collect();
        let mut out = Vec::new();
        for (i, peer) in peers.iter_mut().enumerate() {
            std::thread::scope(|s| {
                s.spawn(|| peer.write_all(&length_prefixed(&big)).unwrap());
                assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Frame(_)));
            });
            assert_eq!(out, big);
            // The first keeps its buffer; the limit then has room for no other.
            let kept: usize = ep.conns.iter().flatten().map(|c| c.grown).sum();
            assert_eq!(kept, ep.grown);
            assert!(ep.grown <= 1 << 20, "{i}: {} bytes kept", ep.grown);
            assert!(ep.grown >= 500 << 10, "{i}: the first connection's buffer was given back");
        }
        // A connection that goes takes what it kept off the count.
        drop(peers.remove(0));
        assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Closed(_)));
        assert_eq!(ep.grown, 0);
    }

    /// Connections beyond the limits, from outside the allowlist, or not established in time
    /// are closed (the peer reads the end of its stream), counted; the others are served.
    #[test]
    fn strangers_cannot_hold_connections() {
        let limits = TcpLimits {
            max_connections: 3,
            max_per_source: 2,
            establish_within: Some(Duration::from_millis(300)),
            allow: vec!["127.0.0.0/30".parse().unwrap()],
            ..TcpLimits::default()
        };
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 100).unwrap().with_limits(limits);
        let addr = ep.local_addr();
        let from = |ip: &str| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::new(ip.parse().unwrap(), 0).into()).unwrap();
            s.connect(&addr.into()).unwrap();
            let s: TcpStream = s.into();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s
        };
        let ended = |mut s: &TcpStream| matches!(s.read(&mut [0u8; 1]), Ok(0) | Err(_));
        let mut out = Vec::new();
        let pump = |ep: &mut TcpEndpoint, out: &mut Vec<u8>, ms: u64| {
            let end = Instant::now() + Duration::from_millis(ms);
            let mut events = Vec::new();
            while Instant::now() < end {
                if let Some(e) = ep.try_next(out).unwrap() {
                    events.push(e);
                }
                ep.block(Some(Duration::from_millis(5))).unwrap();
            }
            events
        };
        let a1 = from("127.0.0.1");
        let a2 = from("127.0.0.1");
        let a3 = from("127.0.0.1"); // a third from one address
        let b1 = from("127.0.0.2");
        let c1 = from("127.0.0.3"); // a fourth in all
        let d1 = from("127.0.0.9"); // outside the allowlist
        pump(&mut ep, &mut out, 50);
        for s in [&a3, &c1, &d1] {
            assert!(ended(s), "closed at once");
        }
        assert_eq!((ep.stats.refused_per_source, ep.stats.refused_total, ep.stats.not_allowed), (1, 1, 1));
        // a1 binds (its owner establishes it); the others linger and are closed.
        (&a1).write_all(&2u32.to_le_bytes()).unwrap();
        (&a1).write_all(b"hi").unwrap();
        let events = pump(&mut ep, &mut out, 50);
        let Some(TcpEvent::Frame(id)) = events.first() else { panic!("{events:?}") };
        ep.establish(id);
        let events = pump(&mut ep, &mut out, 500);
        assert_eq!(events.iter().filter(|e| matches!(e, TcpEvent::Closed(_))).count(), 2, "{events:?}");
        assert!(ended(&a2) && ended(&b1));
        assert_eq!(ep.stats.unestablished_closed, 2);
        ep.send(id, b"", b"ok");
        let mut got = [0u8; 6];
        (&a1).read_exact(&mut got).unwrap();
        assert_eq!(&got[4..], b"ok", "the established one is still served");
    }

    /// Events of a group's members (member, event, frame), looked for until `enough` holds.
    fn pump_group(
        g: &mut [TcpEndpoint],
        enough: impl Fn(&[(usize, TcpEvent, Vec<u8>)]) -> bool,
    ) -> Vec<(usize, TcpEvent, Vec<u8>)> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Vec::new();
        let mut out = Vec::new();
        loop {
            for (m, ep) in g.iter_mut().enumerate() {
                if let Some(e) = ep.try_next(&mut out).unwrap() {
                    seen.push((m, e, out.clone()));
                }
                ep.block(Some(Duration::from_millis(1))).unwrap();
            }
            if enough(&seen) {
                return seen;
            }
            assert!(Instant::now() < deadline, "not enough events: {seen:?}");
        }
    }

    fn frames(seen: &[(usize, TcpEvent, Vec<u8>)]) -> Vec<(usize, &[u8])> {
        seen.iter().filter(|(_, e, _)| matches!(e, TcpEvent::Frame(_))).map(|(m, _, f)| (*m, &f[..])).collect()
    }

    /// A group of two: connections admitted in turn; one handed over with the frame just read,
    /// which the other member reports first, then the rest of the stream; the limits count the
    /// group's connections.
    #[test]
    fn a_group_spreads_connections_and_hands_them_over_with_their_frame() {
        let limits = TcpLimits { max_connections: 3, ..TcpLimits::default() };
        let g = TcpEndpoint::bind_group("127.0.0.1:0".parse().unwrap(), LengthPrefix::new(100), 2).unwrap();
        let mut g: Vec<_> = g.into_iter().map(|e| e.with_limits(limits.clone())).collect();
        assert_eq!((g[0].member(), g[1].member(), g[1].members()), (0, 1, 2));
        let addr = g[0].local_addr();
        let connect = || TcpChannel::connect(addr, 100, Duration::from_secs(5)).unwrap();
        let mut a = connect();
        let seen = pump_group(&mut g, |_| true);
        assert!(seen.is_empty(), "{seen:?}");
        let mut b = connect();
        a.send(b"", b"a1").unwrap();
        b.send(b"", b"b1").unwrap();
        let seen = pump_group(&mut g, |s| frames(s).len() == 2);
        let mut got = frames(&seen);
        got.sort();
        assert_eq!(got, [(0, &b"a1"[..]), (1, &b"b1"[..])], "admitted in turn");
        // Member 0 hands `a` to member 1 with the frame it read; the next frame follows it.
        a.send(b"", b"a2").unwrap();
        a.send(b"", b"a3").unwrap();
        let seen = pump_group(&mut g[..1], |s| !frames(s).is_empty());
        let (_, TcpEvent::Frame(old), frame) = &seen[0] else { panic!("{seen:?}") };
        assert_eq!(frame, b"a2");
        g[0].hand_over(old, b"a2", 1);
        let seen = pump_group(&mut g, |s| {
            frames(s).len() == 2 && s.iter().any(|(m, e, _)| *m == 0 && *e == TcpEvent::Closed(*old))
        });
        assert_eq!(frames(&seen), [(1, &b"a2"[..]), (1, &b"a3"[..])]);
        let new = seen.iter().find_map(|(m, e, _)| match e {
            TcpEvent::Frame(id) if *m == 1 => Some(*id),
            _ => None,
        });
        g[1].send(&new.unwrap(), b"", b"from 1");
        let mut reply = Vec::new();
        recv(&mut a, &mut reply).unwrap();
        assert_eq!(reply, b"from 1");
        // Two open, the group's limit three: one more is taken, the next refused.
        let _c = connect();
        let mut d = TcpStream::connect(addr).unwrap();
        d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while g[0].stats.refused_total == 0 {
            assert!(Instant::now() < deadline, "the fourth connection was not refused");
            pump_group(&mut g, |_| true);
        }
        assert_eq!(g[0].stats.refused_total, 1);
        assert!(matches!(d.read(&mut [0u8; 1]), Ok(0) | Err(_)), "closed at once");
    }

    #[test]
    fn oversized_frame_closes_the_connection() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 100).unwrap();
        let mut raw = TcpStream::connect(ep.local_addr()).unwrap();
        raw.write_all(&1000u32.to_le_bytes()).unwrap();
        let mut out = Vec::new();
        assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Closed(_)));
        // The client sees the close too.
        let mut ch = TcpChannel::connect(ep.local_addr(), 10, Duration::from_secs(5)).unwrap();
        let TcpEvent::Frame(id) = ({
            ch.send(b"", b"hi").unwrap();
            next_event(&mut ep, &mut out)
        }) else {
            panic!()
        };
        ep.send(&id, &[0u8; 50], b"");
        let e = recv(&mut ch, &mut out).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
