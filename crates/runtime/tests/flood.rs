//! A bind flood against a UDP endpoint while an honest client binds and calls: 100,000 binds
//! from 128 sockets on eight source addresses (127.0.0.2 to 127.0.0.9: all of 127/8 is this
//! host), half of them first binds that never come back for their session (as from forged
//! addresses), half answering the cookie round and then never calling (as from a botnet's own
//! addresses). The honest client binds within a second every time, its calls all succeed, and
//! the server's state stays bounded.
//!
//! The figures (binds sent per second, the honest client's slowest bind, the server's sessions
//! and the process's resident memory before and after) are printed: run with `--nocapture`.
//!
//! And over tcp: connections whose length prefixes claim the largest frame, each sending a
//! little of it, make the server hold what they sent, not what they claimed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Program, Server, ServerConfig};
use lowlat_proto::wire::{BindRequest, ByteOrder, Header, Kind, BIND_COOKIE, PROTOCOL_VERSION};

const PROG: u32 = 0x2000_F100;
const BINDS: u64 = 100_000;
const SOURCES: u8 = 8;
const SOCKETS_PER_SOURCE: usize = 16;
/// The flood is spread over this long, so that the honest client binds and calls throughout.
const FLOOD_FOR: Duration = Duration::from_secs(4);

/// The process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A bind datagram as a client sends it (CRC32C after it), with the cookie when given.
fn bind_datagram(nonce: u32, cookie: Option<&[u8]>) -> Vec<u8> {
    let req = BindRequest {
        program: PROG,
        version: 1,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::host(),
        flags: if cookie.is_some() { BIND_COOKIE } else { 0 },
        max_message: 1 << 20,
        max_frame: 1472,
        slots: 1,
        window: 2,
        nonce: nonce as u64,
    };
    let h = Header { call_no: nonce, ..Header::new(Kind::Bind) };
    let mut d = [&h.to_bytes()[..], &req.emit(), cookie.unwrap_or_default()].concat();
    let crc = crc32c::crc32c(&d);
    d.extend_from_slice(&crc.to_le_bytes());
    d
}

/// One flooding thread: sockets on `source`, sending first binds until `sent` reaches
/// [`BINDS`]; `complete`: answering every cookie with its bind (and so holding sessions it
/// never calls in).
fn flood(target: SocketAddr, source: u8, complete: bool, sent: Arc<AtomicU64>, granted: Arc<AtomicU64>) {
    let socks: Vec<UdpSocket> = (0..SOCKETS_PER_SOURCE)
        .map(|_| {
            let s = UdpSocket::bind(format!("127.0.0.{source}:0")).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let mut nonce = (source as u32) << 24;
    let mut buf = [0u8; 2048];
    let (begun, mine) = (Instant::now(), BINDS / SOURCES as u64);
    let mut sent_here = 0u64;
    while sent.load(Ordering::Relaxed) < BINDS {
        for s in &socks {
            nonce += 1;
            let _ = s.send_to(&bind_datagram(nonce, None), target);
            sent.fetch_add(1, Ordering::Relaxed);
            sent_here += 1;
            if !complete {
                while s.recv(&mut buf).is_ok() {}
                continue;
            }
            while let Ok(n) = s.recv(&mut buf) {
                let Ok((h, body)) = Header::parse(&buf[..n.saturating_sub(4)]) else { continue };
                match h.kind {
                    Kind::BindRetry => {
                        let _ = s.send_to(&bind_datagram(h.call_no, Some(&body[..20])), target);
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    Kind::BindOk => {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        }
        // This thread's share, evenly over FLOOD_FOR.
        let due = FLOOD_FOR.mul_f64(sent_here as f64 / mine as f64);
        if let Some(ahead) = due.checked_sub(begun.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}

/// One flood at a time: each measures the process's resident memory and wants the CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn an_honest_client_binds_and_calls_through_a_bind_flood() {
    through_a_flood(1);
}

/// The same against four serving threads (binds spread over them by the kernel's hash; the
/// session limits counted across them).
#[test]
fn an_honest_client_binds_and_calls_through_a_bind_flood_on_four_threads() {
    through_a_flood(4);
}

fn through_a_flood(threads: usize) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let program = Program::new(PROG, 1).procedure(1, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    });
    let cfg = ServerConfig { threads, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&["udp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let target: SocketAddr = uri.trim_start_matches("udp://").parse().unwrap();
    let rss_before = rss_kib();
    let (sent, granted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let begun = Instant::now();
    let flooders: Vec<_> = (0..SOURCES)
        .map(|i| {
            let (sent, granted) = (sent.clone(), granted.clone());
            std::thread::spawn(move || flood(target, 2 + i, i % 2 == 1, sent, granted))
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let honest = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut slowest, mut binds, mut calls) = (Duration::ZERO, 0u32, 0u32);
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                let c = Client::connect_with(&uri, PROG, 1, ClientConfig { slots: 1, ..ClientConfig::default() })
                    .unwrap_or_else(|e| panic!("honest bind {binds} failed after {:?}: {e}", t.elapsed()));
                slowest = slowest.max(t.elapsed());
                binds += 1;
                for i in 0..20u32 {
                    let got = c
                        .call::<_, lowlat::DecodeError>(
                            1,
                            |a| {
                                a.extend_from_slice(&i.to_le_bytes());
                                Ok(())
                            },
                            |r| Ok(r.to_vec()),
                        )
                        .unwrap_or_else(|e| panic!("honest call failed during the flood: {e}"));
                    assert_eq!(got, i.to_le_bytes());
                    calls += 1;
                }
            }
            (slowest, binds, calls)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while sent.load(Ordering::Relaxed) < BINDS {
        assert!(Instant::now() < deadline, "the flood did not finish");
        let s = server.stats()[0].1;
        assert!(s.sessions_open <= 1024, "{s:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for f in flooders {
        f.join().unwrap();
    }
    let flood_time = begun.elapsed();
    done.store(true, Ordering::Relaxed);
    let (slowest, binds, calls) = honest.join().unwrap();
    let s = server.stats()[0].1;
    let rss_after = rss_kib();
    eprintln!(
        "flood (serving threads: {threads}): {} binds sent in {:.2} s ({:.0} binds/s) from {} sockets on {} addresses; {} granted to flooders; \
         honest client: {binds} binds (slowest {slowest:?}), {calls} calls, all served; server: {} cookies issued \
         (first binds that reached it), {} sessions open, {} reclaimed, {} refused at the source limit, {} expired; \
         resident memory {rss_before} KiB before, {rss_after} KiB after",
        sent.load(Ordering::Relaxed),
        flood_time.as_secs_f64(),
        sent.load(Ordering::Relaxed) as f64 / flood_time.as_secs_f64(),
        SOURCES as usize * SOCKETS_PER_SOURCE,
        SOURCES,
        granted.load(Ordering::Relaxed),
        s.cookies_issued,
        s.sessions_open,
        s.sessions_reclaimed,
        s.refused_source_limit,
        s.sessions_expired,
    );
    assert!(slowest < Duration::from_secs(1), "an honest bind took {slowest:?}");
    assert!(binds >= 10 && calls >= 200, "the honest client bound {binds} times and made {calls} calls");
    // The kernel drops what the socket's buffer cannot hold; most of the flood reached the server.
    assert!(s.cookies_issued >= BINDS / 4, "{s:?}");
    assert!(granted.load(Ordering::Relaxed) > 1000, "the flooders held sessions, and the table made room");
    assert!(s.sessions_open <= 1024);
    // Sessions are a few hundred bytes each (one slot asked for): the table's whole worth is
    // far below this.
    assert!(rss_after.saturating_sub(rss_before) < 64 << 10, "{rss_before} -> {rss_after} KiB");
}

/// Connections that each send a length prefix claiming the largest frame and then 60 bytes: the
/// server holds what they sent (a read's worth each), not what they claimed (the prefix used to
/// make it zero the whole frame: 64 connections, 4 KiB from their side, made it commit 256 MiB);
/// an honest client is served meanwhile, and the strangers are closed when their time to bind
/// runs out.
#[test]
fn length_prefixes_claiming_large_frames_commit_no_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let program = Program::new(PROG, 1).procedure(1, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    });
    let cfg = ServerConfig { bind_within: Duration::from_millis(500), ..ServerConfig::default() };
    let claimed = cfg.max_message as u32;
    let server = Server::builder().program(program).config(cfg).serve(&["tcp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let honest = Client::connect(&uri, PROG, 1).unwrap();
    let echo = |n: u32| {
        let args = |a: &mut lowlat::OutBuf| {
            a.extend_from_slice(&n.to_le_bytes());
            Ok(())
        };
        honest.call::<_, lowlat::DecodeError>(1, args, |r| Ok(r.to_vec()))
    };
    assert_eq!(echo(0).unwrap(), 0u32.to_le_bytes());
    let rss_before = rss_kib();
    let addr: SocketAddr = uri.trim_start_matches("tcp://").parse().unwrap();
    let mut strangers: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&claimed.to_le_bytes()).unwrap();
            s.write_all(&[7; 60]).unwrap();
            s
        })
        .collect();
    // The server reads them as they come; an honest call after them is served.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(echo(1).unwrap(), 1u32.to_le_bytes());
    let rss_after = rss_kib();
    eprintln!(
        "64 connections claiming {claimed}-byte frames: resident memory {rss_before} KiB before, {rss_after} KiB after"
    );
    // A read's worth (64 KiB) each is 4 MiB; claimed, 256 MiB.
    assert!(rss_after.saturating_sub(rss_before) < 32 << 10, "{rss_before} -> {rss_after} KiB");
    for s in &mut strangers {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        match s.read(&mut [0u8; 8]) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("a stranger's connection was not closed: {other:?}"),
        }
    }
    assert_eq!(server.stats()[0].1.connections_unbound_closed, 64);
    assert_eq!(echo(2).unwrap(), 2u32.to_le_bytes());
}
