//! Bindings strangers cannot hijack, on real sockets: frames altered in flight are dropped by
//! their tag and the calls complete after retransmission; replayed and forged calls never run;
//! allowlists drop strangers; and the counters say exactly what happened.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Program, Psk, Server, ServerConfig};
use lowlat_proto::wire::Header;
use lowlat_relay::{Faults, Probability, RelayThread};

mod common;
use common::{lab_program_counting, settle, Encoding, Lab, OnPath, PROG};

fn psk() -> Psk {
    Psk::new(b"thirty-two bytes of a shared key").unwrap()
}

/// The lab's COUNT (increments a server-wide counter and returns it: a call run twice shows).
fn count(c: &Client) -> Result<u64, Error> {
    Lab::new(c).count()
}

/// Timers for tests that count frames: no retransmission or acknowledgement on a quiet
/// loopback within the test.
fn patient() -> lowlat_proto::ClientEngineConfig {
    lowlat_proto::ClientEngineConfig {
        initial_rto: Duration::from_secs(2),
        min_rto: Duration::from_secs(1),
        ack_delay: Duration::from_secs(30),
        ..lowlat_proto::ClientEngineConfig::default()
    }
}

/// The relay flips a bit in a fifth of the datagrams both ways, with the UDP checksum off at
/// both ends: only the tags stand between the flips and the procedure. Every call completes,
/// each ran exactly once, and both ends counted the frames whose tags failed.
#[test]
fn frames_altered_in_flight_are_dropped_and_the_calls_complete() {
    altered_in_flight(1);
}

/// The same against four serving threads (a flip in the token's session index may steer a
/// frame to a thread that does not hold the session: it is refused there as unknown).
#[test]
fn frames_altered_in_flight_are_dropped_with_four_threads() {
    altered_in_flight(4);
}

fn altered_in_flight(threads: usize) {
    let (program, counter) = lab_program_counting(Encoding::Native);
    let cfg = ServerConfig { psk: Some(psk()), checksum: false, threads, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&["udp://127.0.0.1:0"]).unwrap();
    let target: SocketAddr = server.local_uris()[0].trim_start_matches("udp://").parse().unwrap();
    let faults = Faults { corrupt: Probability::new(0.2).unwrap(), seed: 20261125, ..Faults::default() };
    let relay = RelayThread::start("127.0.0.1:0".parse().unwrap(), target, faults).unwrap();
    let cfg = ClientConfig { psk: Some(psk()), checksum: false, slots: 1, ..ClientConfig::default() };
    // The bind itself may meet a flipped bit: a grant whose tag fails is ignored, and the
    // bind is retransmitted.
    let client = Client::connect_with(&format!("udp://{}", relay.addr()), PROG, 1, cfg).unwrap();
    for i in 1..=300u64 {
        assert_eq!(count(&client).unwrap(), i, "call {i} ran once, and its result arrived intact");
    }
    assert_eq!(counter.load(Ordering::SeqCst), 300);
    let report = relay.stop().unwrap();
    let s = server.stats()[0].1;
    let c = client.stats();
    assert!(report.to_target.corrupted > 20 && report.to_clients.corrupted > 20, "{report:?}");
    assert!(s.mac_failures > 0 && c.mac_failures > 0, "server {s:?}, client {c:?}");
    // Every flip that reached an engine was caught by a tag or by the header's checks.
    let caught = s.mac_failures + s.malformed + s.unknown_session;
    assert!(caught <= report.to_target.corrupted, "{s:?} {report:?}");
    assert_eq!((s.calls, s.executed), (300, 300));
    assert!(c.retransmissions > 0);
}

/// With the checksum on, a datagram's CRC32C after it is rewritten.
fn recrc(d: &mut [u8]) {
    let n = d.len() - 4;
    let crc = crc32c::crc32c(&d[..n]);
    d[n..].copy_from_slice(&crc.to_le_bytes());
}

/// Calls recorded and sent again, from the client's address or another, are answered from
/// the saved result (at the client's proven address) or with a path challenge (from another),
/// never run; a recorded call altered to look new (a later call number) fails its tag. The
/// server's counters say exactly that.
#[test]
fn replayed_and_forged_calls_never_run_and_are_counted() {
    replayed_and_forged(1);
}

/// The same against four serving threads: the replays and forgeries reach the thread holding
/// the session (steered by its token), which treats them as one thread does.
#[test]
fn replayed_and_forged_calls_never_run_with_four_threads() {
    replayed_and_forged(4);
}

fn replayed_and_forged(threads: usize) {
    let (program, counter) = lab_program_counting(Encoding::Native);
    let cfg = ServerConfig { psk: Some(psk()), threads, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&["udp://127.0.0.1:0"]).unwrap();
    let target: SocketAddr = server.local_uris()[0].trim_start_matches("udp://").parse().unwrap();
    let rec = OnPath::start(target);
    let cfg = ClientConfig { psk: Some(psk()), slots: 1, engine: patient(), ..ClientConfig::default() };
    let client = Client::connect_with(&rec.uri(), PROG, 1, cfg).unwrap();
    for i in 1..=10 {
        assert_eq!(count(&client).unwrap(), i);
    }
    let calls = rec.calls();
    assert_eq!(calls.len(), 10);
    // The last call again, as the client sent it: its saved result is sent again.
    rec.send_upstream(&calls[9]);
    // Every call again, from another address: each answered with a challenge only.
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    for c in &calls {
        stranger.send_to(c, target).unwrap();
    }
    // The first call, made to look like the next one: its tag no longer fits.
    let mut forged = calls[0].clone();
    let (mut head, _) = Header::parse(&forged).unwrap();
    head.call_no = 11;
    head.emit(forged.first_chunk_mut().unwrap());
    recrc(&mut forged);
    stranger.send_to(&forged, target).unwrap();
    let s = settle(&server, |s| s.duplicates + s.unproven + s.mac_failures >= 12);
    assert_eq!(counter.load(Ordering::SeqCst), 10, "nothing ran twice");
    assert_eq!((s.calls, s.executed, s.duplicates, s.stale, s.mac_failures), (10, 10, 1, 0, 1), "{s:?}");
    assert_eq!((s.unproven, s.path_challenges), (10, 10), "{s:?}");
    assert_eq!((s.binds_granted, s.cookies_issued, s.binds_refused, s.retransmits_received), (1, 1, 0, 0));
    // The binding goes on.
    assert_eq!(count(&client).unwrap(), 11);
}

/// Exact counters after a known sequence: one bind, twelve calls (two of them to a procedure
/// the program lacks), a refused bind, and no retransmission.
#[test]
fn server_stats_report_exactly_what_happened() {
    let (program, _) = lab_program_counting(Encoding::Native);
    let server = Server::builder().program(program).serve(&["udp://127.0.0.1:0", "tcp://127.0.0.1:0"]).unwrap();
    let uris = server.local_uris();
    let cfg = ClientConfig { slots: 1, engine: patient(), ..ClientConfig::default() };
    let udp = Client::connect_with(&uris[0], PROG, 1, cfg.clone()).unwrap();
    for _ in 0..10 {
        count(&udp).unwrap();
    }
    for _ in 0..2 {
        let e = udp.call::<_, lowlat::DecodeError>(99, |_| Ok(()), |_| Ok(())).unwrap_err();
        assert!(matches!(e, Error::UnknownProcedure { .. }), "{e}");
    }
    let e = Client::connect_with(&uris[0], PROG + 1, 1, cfg.clone()).unwrap_err();
    assert!(matches!(e, Error::UnknownProgram { .. }), "{e}");
    let stats = server.stats();
    let (uri, s) = &stats[0];
    assert_eq!(uri, &uris[0]);
    assert_eq!(s.sessions_open, 1);
    assert_eq!((s.binds_granted, s.binds_refused, s.refused_unknown_program, s.cookies_issued), (1, 1, 1, 1));
    assert_eq!((s.calls, s.executed, s.errors_unknown_procedure), (12, 10, 2));
    assert_eq!((s.duplicates, s.retransmits_received, s.busy, s.mac_failures), (0, 0, 0, 0));
    // Frames in: two of the bind, twelve calls, and the refused bind; each answered.
    assert_eq!((s.frames_in, s.frames_out), (15, 15), "{s:?}");
    // The TCP endpoint saw nothing (its serving thread ran, on a clock of its own), and binds
    // there take no cookie round.
    let idle = stats[1].1;
    assert_eq!(idle, lowlat::EndpointStats { serving_cpu_ns: idle.serving_cpu_ns, ..Default::default() });
    assert!(s.serving_cpu_ns > 0, "the serving thread's CPU is counted: {s:?}");
    let tcp = Client::connect_with(&uris[1], PROG, 1, cfg).unwrap();
    count(&tcp).unwrap();
    let t = server.stats()[1].1;
    assert_eq!((t.binds_granted, t.cookies_issued, t.calls, t.executed, t.sessions_open), (1, 0, 1, 1, 1));
    let c = udp.stats();
    assert_eq!((c.binds, c.calls, c.retransmissions, c.mac_failures), (1, 12, 0, 0));
}

/// Sources outside the allowlist are dropped unread, over every transport that takes one: a
/// lowlat client's bind times out (udp) or finds its connection closed (tcp), an ONC RPC call
/// times out (udp) or its connection closes (tcp); the counters say how many. Allowed sources
/// are served.
#[test]
fn allowlists_drop_strangers_silently() {
    allowlists(1);
}

#[test]
fn allowlists_drop_strangers_silently_with_four_threads() {
    allowlists(4);
}

fn allowlists(threads: usize) {
    let (program, _) = lab_program_counting(Encoding::Native);
    let uris = ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"];
    let elsewhere = ServerConfig {
        allow: vec!["10.0.0.0/8".parse().unwrap()],
        onc_register: false,
        threads,
        ..ServerConfig::default()
    };
    let xdr = program.clone().xdr();
    let server =
        Server::builder().program(program.clone()).program(xdr.clone()).config(elsewhere).serve(&uris).unwrap();
    let cfg = ClientConfig {
        bind_timeout: Duration::from_millis(300),
        deadline: Duration::from_millis(300),
        ..ClientConfig::default()
    };
    for uri in server.local_uris() {
        let begun = Instant::now();
        let e = Client::connect_with(&uri, PROG, 1, cfg.clone()).and_then(|c| count(&c)).unwrap_err();
        assert!(begun.elapsed() < Duration::from_secs(2), "{uri}: {e}");
        match uri.split("://").next().unwrap() {
            "udp" => assert!(matches!(e, Error::BindTimeout { .. }), "{uri}: {e}"),
            "onc+udp" => assert!(matches!(e, Error::Timeout { .. }), "{uri}: {e}"),
            _ => assert!(
                matches!(e, Error::ServerNotRunning { .. } | Error::ConnectionLost { .. } | Error::Io { .. }),
                "{uri}: {e}"
            ),
        }
    }
    for (uri, s) in server.stats() {
        assert!(s.not_allowed >= 1, "{uri}: {s:?}");
        assert_eq!((s.calls, s.binds_granted, s.cookies_issued), (0, 0, 0), "{uri}: nothing was read");
    }
    server.shutdown();
    let here = ServerConfig {
        allow: vec!["127.0.0.0/8".parse().unwrap()],
        onc_register: false,
        threads,
        ..ServerConfig::default()
    };
    let server = Server::builder().program(program).program(xdr).config(here).serve(&uris).unwrap();
    for uri in server.local_uris() {
        let c = Client::connect_with(&uri, PROG, 1, cfg.clone()).unwrap();
        assert!(count(&c).unwrap() > 0, "{uri}");
    }
}

/// A TCP connection that does not bind in time is closed, and counted.
#[test]
fn tcp_connections_that_do_not_bind_are_closed() {
    tcp_unbound_closed(1);
}

/// The same with four serving threads (the idle connection admitted by one, given to another).
#[test]
fn tcp_connections_that_do_not_bind_are_closed_with_four_threads() {
    tcp_unbound_closed(4);
}

fn tcp_unbound_closed(threads: usize) {
    use std::io::Read;
    let (program, _) = lab_program_counting(Encoding::Native);
    let cfg = ServerConfig { bind_within: Duration::from_millis(200), threads, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&["tcp://127.0.0.1:0"]).unwrap();
    let addr = server.local_uris()[0].trim_start_matches("tcp://").to_string();
    let mut idle = std::net::TcpStream::connect(&addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let begun = Instant::now();
    assert!(matches!(idle.read(&mut [0u8; 8]), Ok(0) | Err(_)));
    assert!(begun.elapsed() < Duration::from_secs(2), "closed after {:?}", begun.elapsed());
    // A client that binds keeps its connection past the limit.
    let c = Client::connect(&server.local_uris()[0], PROG, 1).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    count(&c).unwrap();
    assert_eq!(server.stats()[0].1.connections_unbound_closed, 1);
}

/// A client's other slots open connections they never bind on: one whose first call runs
/// longer than the time to bind is its owner's all the same (it names a session granted here).
#[test]
fn a_long_first_call_on_a_slots_own_connection_is_not_cut_off() {
    long_first_call(1);
}

/// The same with four serving threads: the slots' connections, admitted by other threads, are
/// handed to the session's with their first call, and established there.
#[test]
fn a_long_first_call_on_a_slots_own_connection_is_not_cut_off_with_four_threads() {
    long_first_call(4);
}

fn long_first_call(threads: usize) {
    let slow = Program::new(PROG, 1).long_running(2, "SLOW", |_, _, r| {
        std::thread::sleep(Duration::from_millis(600));
        r.extend_from_slice(b"done");
        Ok(())
    });
    let cfg = ServerConfig { bind_within: Duration::from_millis(200), threads, ..ServerConfig::default() };
    let server = Server::builder().program(slow).config(cfg).serve(&["tcp://127.0.0.1:0"]).unwrap();
    let client = Arc::new(Client::connect(&server.local_uris()[0], PROG, 1).unwrap());
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let c = client.clone();
            std::thread::spawn(move || c.call::<_, lowlat::DecodeError>(2, |_| Ok(()), |r| Ok(r.to_vec())))
        })
        .collect();
    for c in calls {
        assert_eq!(c.join().unwrap().unwrap(), b"done");
    }
    let s = server.stats()[0].1;
    assert_eq!((s.connections_unbound_closed, s.executed), (0, 3), "{s:?}");
}
