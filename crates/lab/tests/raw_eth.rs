//! Raw ping-pong and the XDP floor between two network namespaces.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_eth::frame::FrameType;
use lowlat_eth::{EthConfig, EthSocket, FrameSocket, OpenOptions, XdpConfig, XdpSocket};
use lowlat_lab::raw::eth_pingpong::{self as pingpong, Floor, RunConfig};
use lowlat_testkit::testhosts::{self, TestHosts};
use lowlat_wait::SpinPolicy;

mod common {
    use super::*;

    /// The test hosts, or None (with the reason printed) when not root.
    pub fn hosts(mtu: u32) -> Option<TestHosts> {
        if let Err(why) = testhosts::check_root() {
            eprintln!("SKIPPED: {why}");
            return None;
        }
        let cfg = testhosts::TestHostsConfig { mtu, ..Default::default() };
        Some(TestHosts::with_config(cfg).expect("creating test hosts"))
    }

    pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    /// Joins a namespace thread, failing the test if it does not finish within `secs`.
    pub fn join<T>(h: std::thread::JoinHandle<testhosts::Result<T>>, secs: u64) -> T {
        let end = Instant::now() + Duration::from_secs(secs);
        while !h.is_finished() {
            assert!(Instant::now() < end, "namespace thread did not finish within {secs} s");
            std::thread::sleep(Duration::from_millis(2));
        }
        h.join().expect("namespace thread panicked").expect("entering the namespace")
    }
}

fn open(uri: String, server: bool) -> Box<dyn FrameSocket> {
    let ep = uri.parse().unwrap();
    lowlat_eth::socket::open(&ep, OpenOptions { answer_discovery: server, ..OpenOptions::default() }).unwrap()
}

fn echo(server_uri: &str, client_uri: &str, spin: SpinPolicy) {
    let Some(h) = common::hosts(1500) else { return };
    let uri_a = server_uri.replace("IF", &h.a.iface);
    let mut server = common::join(h.a.spawn(move || open(uri_a, true)), 5);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = std::thread::spawn(move || pingpong::serve(server.as_mut(), spin, &st));
    let uri_b = client_uri.replace("IF", &h.b.iface);
    let a_mac = h.a.mac;
    let lat = common::join(
        h.b.spawn(move || {
            let mut c = open(uri_b, false);
            let peer = c.discover(5, Duration::from_millis(200)).unwrap();
            assert_eq!(peer, a_mac);
            let cfg = RunConfig { size: 1024, rounds: 300, warmup: 20, spin, ..RunConfig::default() };
            pingpong::run(c.as_mut(), peer, &cfg).unwrap()
        }),
        20,
    );
    stop.store(true, Ordering::Relaxed);
    let echoed = server.join().unwrap().unwrap();
    assert_eq!(echoed, 320);
    let mut lat = lat;
    let s = pingpong::summarize(&mut lat);
    assert_eq!(s.count, 300);
    assert!(s.p50 > 0 && s.p50 <= s.p99);
    eprintln!("{server_uri} <- {client_uri} ({spin}): {s:?}");
}

#[test]
fn eth_echo_spinning() {
    echo("eth://IF", "eth://IF", SpinPolicy::Forever);
}

#[test]
fn xdp_echo_blocking() {
    echo("xdp://IF", "xdp://IF", SpinPolicy::Block);
}

#[test]
fn xdp_floor_answers_in_the_driver() {
    let Some(h) = common::hosts(1500) else { return };
    let iface = h.a.iface.clone();
    // A user-level socket on the server side, to prove that PINGs never reach user space.
    let (floor, mut watcher) = common::join(
        h.a.spawn(move || {
            (Floor::attach(&iface, None).unwrap(), EthSocket::open(&iface, EthConfig::default()).unwrap())
        }),
        5,
    );
    let a_mac = h.a.mac;
    for xdp_client in [false, true] {
        let iface = h.b.iface.clone();
        let lat = common::join(
            h.b.spawn(move || {
                let mut c: Box<dyn FrameSocket> = if xdp_client {
                    Box::new(XdpSocket::open(&iface, XdpConfig::default()).unwrap())
                } else {
                    Box::new(EthSocket::open(&iface, EthConfig::default()).unwrap())
                };
                let cfg =
                    RunConfig { size: 32, rounds: 300, warmup: 20, kind: FrameType::Ping, ..RunConfig::default() };
                pingpong::run(c.as_mut(), a_mac, &cfg).unwrap()
            }),
            20,
        );
        let mut lat = lat;
        eprintln!("floor ({:?}), xdp client {xdp_client}: {:?}", floor.mode(), pingpong::summarize(&mut lat));
    }
    let mut buf = vec![0u8; watcher.max_payload()];
    assert_eq!(watcher.try_recv_from(&mut buf).unwrap(), None, "a PING reached user space");
    drop(floor);
}

#[test]
fn run_reports_a_missing_peer() {
    let Some(h) = common::hosts(1500) else { return };
    let iface = h.b.iface.clone();
    let e = common::join(
        h.b.spawn(move || {
            let mut c = EthSocket::open(&iface, EthConfig::default()).unwrap();
            let cfg = RunConfig { rounds: 1, warmup: 0, timeout: Duration::from_millis(30), ..RunConfig::default() };
            pingpong::run(&mut c, lowlat_eth::Mac([2, 0, 0, 0, 0, 9]), &cfg).unwrap_err()
        }),
        5,
    );
    assert!(matches!(e, lowlat_eth::Error::NoReply { .. }), "{e}");
}

#[test]
fn ladder_rungs_across_the_pair() {
    use lowlat_lab::raw::eth_hosts::{self as ladder, Pinning, Responder, Side};
    let Some(h) = common::hosts(1500) else { return };
    let cfg = RunConfig { size: 64, rounds: 100, warmup: 10, spin: SpinPolicy::Block, ..RunConfig::default() };
    for (responder, client) in [
        (Responder::User(Side::Eth(EthConfig::default())), Side::Xdp(XdpConfig::default())),
        (Responder::XdpFloor, Side::Eth(EthConfig::default())),
    ] {
        let lat = ladder::across(&h, responder, client, &cfg, Pinning::default()).unwrap();
        assert_eq!(lat.len(), 100, "{responder:?}");
    }
    // A failing server side is an error, not a hang: xdp on both ends of side a's interface.
    let iface = h.a.iface.clone();
    let _hold = common::join(h.a.spawn(move || XdpSocket::open(&iface, XdpConfig::default()).unwrap()), 5);
    let e = ladder::across(&h, Responder::XdpFloor, Side::Eth(EthConfig::default()), &cfg, Pinning::default());
    assert!(matches!(e, Err(lowlat_eth::Error::XdpAttach { .. })), "{:?}", e.err());
}

#[test]
fn corruption_on_the_wire_is_caught_and_retried() {
    use lowlat_lab::raw::fault::Corruptor;
    use lowlat_wait::Spinner;

    let Some(h) = common::hosts(1500) else { return };
    let iface = h.a.iface.clone();
    // One in four frames arriving at the server gets a bit flipped on the way in.
    let (corruptor, mut server) = common::join(
        h.a.spawn(move || {
            (Corruptor::attach(&iface, 2).unwrap(), EthSocket::open(&iface, EthConfig::default()).unwrap())
        }),
        5,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = std::thread::spawn(move || {
        pingpong::serve(&mut server, SpinPolicy::Block, &st).unwrap();
        server
    });
    let (iface, a_mac) = (h.b.iface.clone(), h.a.mac);
    let retries = common::join(
        h.b.spawn(move || {
            let mut c = EthSocket::open(&iface, EthConfig::default()).unwrap();
            let mut buf = vec![0u8; c.max_payload()];
            let mut spin = Spinner::new(SpinPolicy::Block);
            let mut retries = 0;
            for round in 0u32..100 {
                let msg = common::pattern(300, round as u8);
                let mut head = [0u8; 32];
                head[..4].copy_from_slice(&round.to_le_bytes());
                'retry: loop {
                    c.send_to(a_mac, &head, &msg).unwrap();
                    let wait = std::time::Instant::now() + Duration::from_millis(20);
                    while let Some((n, _)) = c.recv_from(&mut buf, &mut spin, Some(wait)).unwrap() {
                        if buf[..4] == round.to_le_bytes() {
                            assert_eq!(&buf[32..n], &msg[..]);
                            break 'retry;
                        }
                    }
                    retries += 1;
                    assert!(retries < 1000, "retransmission never got through");
                }
            }
            retries
        }),
        30,
    );
    stop.store(true, Ordering::Relaxed);
    let server = server.join().unwrap();
    let bad = server.stats().rx_bad_crc.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{bad} corrupted frames dropped, {retries} retransmissions");
    assert!(bad > 0, "the corruptor corrupted nothing?");
    // Every dropped frame cost a retransmission (a slow reply on a loaded machine may cost one
    // more); a corrupted frame that got through would have failed the payload check above.
    assert!(retries >= bad, "{retries} retransmissions for {bad} drops");
    drop(corruptor);
}
