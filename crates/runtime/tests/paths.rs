//! An attacker on the path, from outside, on real sockets: a recorded call sent again from
//! another address reflects no result and no more bytes than it had; a client whose address
//! changes proves the new one and goes on; replays from elsewhere keep no session alive; a
//! refusal forged on the path does not stop a keyed client, and one the client cannot verify
//! is reported as unauthenticated; encrypted sessions hide their bodies and keep exactly-once
//! through a faulty network.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Psk, Server, ServerConfig};
use lowlat_relay::{Faults, Probability, RelayThread};

mod common;
use common::{lab_program_counting, settle, Encoding, Lab, OnPath, PROG};

fn psk() -> Psk {
    Psk::new(b"thirty-two bytes of a shared key").unwrap()
}

fn udp_target(server: &Server) -> SocketAddr {
    server.local_uris()[0].trim_start_matches("udp://").parse().unwrap()
}

/// The lab interface served over udp with `cfg`, with its COUNT counter.
fn lab_over_udp(cfg: ServerConfig) -> (Server, Arc<AtomicU64>) {
    let (program, counter) = lab_program_counting(Encoding::Native);
    (Server::builder().program(program).config(cfg).serve(&["udp://127.0.0.1:0"]).unwrap(), counter)
}

/// Every datagram `sock` receives within `wait`, in bytes.
fn bytes_received(sock: &UdpSocket, wait: Duration) -> usize {
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let (end, mut buf, mut total) = (Instant::now() + wait, [0u8; 65536], 0);
    while Instant::now() < end {
        if let Ok(n) = sock.recv(&mut buf) {
            total += n;
        }
    }
    total
}

/// The reflection of the security review: a keyed client's MAXRESULT(20000) call, recorded and
/// sent ten times from another address. Before, each brought back the kept 20,052-byte result
/// (x358); now each brings a path challenge no larger than the call, and nothing runs.
#[test]
fn a_recorded_call_sent_from_another_address_reflects_nothing() {
    for key in [Some(psk()), None] {
        let (server, counter) = lab_over_udp(ServerConfig { psk: key.clone(), ..ServerConfig::default() });
        let path = OnPath::start(udp_target(&server));
        // Patient timers: on a loaded machine a retransmitted call would be recorded twice.
        let engine = lowlat_proto::ClientEngineConfig {
            initial_rto: Duration::from_secs(2),
            min_rto: Duration::from_secs(1),
            ..lowlat_proto::ClientEngineConfig::default()
        };
        let cfg = ClientConfig { psk: key.clone(), slots: 1, engine, ..ClientConfig::default() };
        let client = Client::connect_with(&path.uri(), PROG, 1, cfg).unwrap();
        assert_eq!(Lab::new(&client).maxresult(20_000).unwrap().len(), 20_000);
        let calls = path.calls();
        assert!(!calls.is_empty() && calls.iter().all(|c| c.len() == calls[0].len()), "the call, one datagram");
        let victim = UdpSocket::bind("127.0.0.1:0").unwrap();
        victim.connect(udp_target(&server)).unwrap();
        for _ in 0..10 {
            victim.send(&calls[0]).unwrap();
        }
        let got = bytes_received(&victim, Duration::from_millis(300));
        let sent = 10 * calls[0].len();
        assert!(got <= sent, "keyed {}: {got} bytes reflected for {sent}", key.is_some());
        let s = settle(&server, |s| s.unproven >= 10);
        assert_eq!((s.unproven, s.path_challenges, s.executed), (10, 10, 1), "{s:?}");
        assert_eq!(counter.load(Ordering::SeqCst), 0, "MAXRESULT counts nothing; COUNT never ran");
        // The client itself is untouched.
        assert_eq!(Lab::new(&client).count().unwrap(), 1);
    }
}

/// A client whose source address changes mid-session (NAT rebinding): its next call is
/// challenged, it answers, and the call completes, run once. Prints the time it took.
#[test]
fn a_client_whose_address_changes_proves_it_and_goes_on() {
    const MOVES: u64 = 15;
    for key in [Some(psk()), None] {
        let (server, counter) = lab_over_udp(ServerConfig { psk: key.clone(), ..ServerConfig::default() });
        let path = OnPath::start(udp_target(&server));
        let cfg =
            ClientConfig { psk: key.clone(), slots: 1, spin: lowlat::SpinPolicy::Forever, ..ClientConfig::default() };
        let client = Client::connect_with(&path.uri(), PROG, 1, cfg).unwrap();
        let lab = Lab::new(&client);
        let (mut usual, mut first) = (Vec::new(), Vec::new());
        let mut n = 0;
        for _ in 0..MOVES {
            for _ in 0..20 {
                n += 1;
                let t = Instant::now();
                assert_eq!(lab.count().unwrap(), n);
                usual.push(t.elapsed());
            }
            path.migrate();
            n += 1;
            let t = Instant::now();
            assert_eq!(lab.count().unwrap(), n, "the first call from the new address ran once");
            first.push(t.elapsed());
        }
        assert_eq!(counter.load(Ordering::SeqCst), n);
        let s = server.stats()[0].1;
        assert_eq!((s.paths_validated, s.path_failures, s.executed), (MOVES, 0, n), "{s:?}");
        assert_eq!(client.stats().binds, 1, "the session went on: no new bind");
        usual.sort();
        first.sort();
        println!(
            "migration (keyed {}, through a forwarding thread on loopback): a call p50 {:?}; the first call \
             from a new address p50 {:?} ({} moves)",
            key.is_some(),
            usual[usual.len() / 2],
            first[first.len() / 2],
            MOVES
        );
    }
}

/// Replays of an old call from another address every 100 ms keep nothing alive: the session
/// expires on time, as an untouched one does.
#[test]
fn replays_from_another_address_keep_no_session_alive() {
    let (server, _) = lab_over_udp(ServerConfig {
        psk: Some(psk()),
        session_idle: Duration::from_millis(800),
        ..ServerConfig::default()
    });
    let path = OnPath::start(udp_target(&server));
    let cfg = ClientConfig { psk: Some(psk()), slots: 1, ..ClientConfig::default() };
    let client = Client::connect_with(&path.uri(), PROG, 1, cfg).unwrap();
    Lab::new(&client).count().unwrap();
    let recorded = path.calls().remove(0);
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let start = Instant::now();
    while server.stats()[0].1.sessions_open > 0 && start.elapsed() < Duration::from_secs(5) {
        stranger.send_to(&recorded, udp_target(&server)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = server.stats()[0].1;
    assert_eq!(s.sessions_open, 0, "replays kept the session alive for {:?}", start.elapsed());
    // Idle 0.8 s: gone within 1.2 s of the last real call (sweeps every 0.2 s), with room for a
    // loaded machine; replays every 0.1 s would have kept it for the loop's whole 5 s.
    assert!(start.elapsed() < Duration::from_millis(2500), "expired after {:?}", start.elapsed());
    assert!(s.sessions_expired >= 1 && s.unproven > 0, "{s:?}");
}

/// A refusal forged on the path (untagged "the two keys differ") does not stop a client that
/// holds the right key: it binds and calls.
#[test]
fn a_refusal_forged_on_the_path_does_not_stop_a_keyed_client() {
    let (server, _) = lab_over_udp(ServerConfig { psk: Some(psk()), ..ServerConfig::default() });
    let path = OnPath::start(udp_target(&server));
    path.forge_refusals.store(true, Ordering::Relaxed);
    let cfg = ClientConfig { psk: Some(psk()), slots: 1, ..ClientConfig::default() };
    let client = Client::connect_with(&path.uri(), PROG, 1, cfg).unwrap();
    assert_eq!(Lab::new(&client).count().unwrap(), 1);
}

/// A client whose key the server cannot share (another key, or none) is told, at its bind's
/// deadline, that the refusals it got were unauthenticated: not that the keys differ, which
/// an attacker could have said.
#[test]
fn refusals_a_keyed_client_cannot_verify_are_reported_as_unauthenticated() {
    let other = Psk::new(b"another thirty-two byte long key").unwrap();
    for server_key in [None, Some(other)] {
        let (server, _) = lab_over_udp(ServerConfig { psk: server_key.clone(), ..ServerConfig::default() });
        let bind_timeout = Duration::from_secs(1);
        let cfg = ClientConfig { psk: Some(psk()), bind_timeout, ..ClientConfig::default() };
        let started = Instant::now();
        let e = Client::connect_with(&server.local_uris()[0], PROG, 1, cfg).unwrap_err();
        assert!(matches!(e, Error::UnauthenticatedRefusal { .. }), "{e}");
        assert!(started.elapsed() >= bind_timeout, "kept trying until the deadline");
        let text = e.to_string();
        assert!(text.contains("unauthenticated refusal") && text.contains("another key or none"), "{text}");
        if server_key.is_none() {
            assert!(text.contains("configured without one"), "the claim is quoted: {text}");
        }
    }
}

/// Encrypted sessions through a relay that drops, duplicates, reorders and corrupts: every
/// COUNT runs exactly once, ECHO's body is never in clear on the wire, and only the key opens
/// the frames (a client with the key but without encryption is refused).
#[test]
fn encrypted_sessions_hide_bodies_and_keep_exactly_once_through_faults() {
    let (server, counter) =
        lab_over_udp(ServerConfig { psk: Some(psk()), encrypt: true, checksum: false, ..ServerConfig::default() });
    // In clear on the wire? Through a recorder first.
    let path = OnPath::start(udp_target(&server));
    let enc = ClientConfig { psk: Some(psk()), encrypt: true, checksum: false, slots: 2, ..ClientConfig::default() };
    let client = Client::connect_with(&path.uri(), PROG, 1, enc.clone()).unwrap();
    let secret = b"the quick brown fox jumps over the lazy dog".repeat(24);
    assert_eq!(Lab::new(&client).echo(&secret).unwrap(), secret);
    let wire = path.all_sent();
    assert!(!wire.iter().any(|d| d.windows(43).any(|w| w == &secret[..43])), "the body went in clear");
    // A client with the key but not encrypting is refused, with what to do.
    let plain = ClientConfig { encrypt: false, ..enc.clone() };
    let e = Client::connect_with(&server.local_uris()[0], PROG, 1, plain).unwrap_err();
    assert!(matches!(e, Error::Encryption { .. }) && e.to_string().contains("--encrypt"), "{e}");
    drop(client);
    // Through faults.
    let faults = Faults {
        drop: Probability::new(0.05).unwrap(),
        dup: Probability::new(0.05).unwrap(),
        reorder: Probability::new(0.05).unwrap(),
        corrupt: Probability::new(0.05).unwrap(),
        seed: 20261127,
        ..Faults::default()
    };
    let relay = RelayThread::start("127.0.0.1:0".parse().unwrap(), udp_target(&server), faults).unwrap();
    let client = Client::connect_with(&format!("udp://{}", relay.addr()), PROG, 1, enc).unwrap();
    let before = counter.load(Ordering::SeqCst);
    for i in 1..=300u64 {
        assert_eq!(Lab::new(&client).count().unwrap(), before + i, "call {i} ran once");
    }
    assert_eq!(Lab::new(&client).echo(&secret).unwrap(), secret);
    let report = relay.stop().unwrap();
    assert!(report.to_target.corrupted > 0 && report.to_target.dropped > 0, "{report:?}");
    let s = server.stats()[0].1;
    assert!(s.mac_failures > 0, "corrupted frames failed their AEAD tags: {s:?}");
    assert_eq!(counter.load(Ordering::SeqCst), before + 300);
}

/// Encryption where it cannot be had is refused at once, saying why.
#[test]
fn encryption_is_refused_over_shared_memory_and_onc_and_without_a_key() {
    let (program, _) = lab_program_counting(Encoding::Native);
    let dir = tempfile::tempdir().unwrap();
    let shm = format!("shm://{}", dir.path().join("s.sock").display());
    let keyed = ServerConfig { psk: Some(psk()), encrypt: true, ..ServerConfig::default() };
    let e = Server::builder().program(program.clone()).config(keyed).serve(&[shm.as_str()]).err().expect("refused");
    assert!(e.to_string().contains("refused over shm://"), "{e}");
    let keyless = ServerConfig { encrypt: true, ..ServerConfig::default() };
    let e = Server::builder()
        .program(program.clone())
        .config(keyless)
        .serve(&["udp://127.0.0.1:0"])
        .err()
        .expect("refused");
    assert!(e.to_string().contains("needs a pre-shared key"), "{e}");
    let server = Server::builder().program(program).serve(&[shm.as_str(), "udp://127.0.0.1:0"]).unwrap();
    let enc = ClientConfig { psk: Some(psk()), encrypt: true, ..ClientConfig::default() };
    let e = Client::connect_with(&server.local_uris()[0], PROG, 1, enc.clone()).unwrap_err();
    assert!(matches!(e, Error::Encryption { .. }) && e.to_string().contains("shm://"), "{e}");
    let e = Client::connect_with("onc+udp://127.0.0.1:9", PROG, 1, enc).unwrap_err();
    assert!(matches!(e, Error::Encryption { .. }), "{e}");
    let e = Client::connect_with(
        &server.local_uris()[1],
        PROG,
        1,
        ClientConfig { encrypt: true, ..ClientConfig::default() },
    )
    .unwrap_err();
    assert!(e.to_string().contains("needs a pre-shared key"), "{e}");
}
