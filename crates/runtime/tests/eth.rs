//! The runtime over `eth://` (AF_PACKET) and `xdp://` (AF_XDP) between two network namespaces
//! joined by a veth pair, what only raw frames do: discovery of the server (the conformance
//! suite, `tests/suite/mod.rs`, calls a known peer), calls that complete through corrupted
//! frames, checksums switched off. Skipped, with the reason printed, when not run as root.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Server};
use lowlat_eth::bpf;
use lowlat_testkit::testhosts::{self, TestHosts};

mod common;
use common::{bytes, check_lab_procedures, ECHO, NULL, PROG};

fn hosts() -> Option<TestHosts> {
    if let Err(why) = testhosts::check_root() {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    Some(TestHosts::new().expect("creating test hosts"))
}

/// Joins a namespace thread, failing the test if it runs longer than `secs`.
fn join<T>(h: JoinHandle<testhosts::Result<T>>, secs: u64) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    while !h.is_finished() {
        assert!(Instant::now() < end, "thread did not finish within {secs} s");
        std::thread::sleep(Duration::from_millis(5));
    }
    h.join().expect("thread panicked").expect("entering the namespace")
}

/// lowlat's corrupting XDP program on `iface` (in the calling thread's namespace), flipping a bit
/// in about one in `2^shift` received frames until the pair is dropped: what
/// `lowlat_lab::raw::fault::Corruptor` does, built here from lowlat-eth's loader because the
/// laboratory depends on the runtime and the runtime's tests cannot depend on it.
fn corrupt(iface: &str, shift: u32) -> (bpf::Link, bpf::Program) {
    let info = lowlat_eth::ifinfo::IfInfo::get(iface).unwrap();
    let prog = bpf::Program::load_xdp("lowlat_corrupt", &bpf::corrupt_program(shift)).unwrap();
    let (link, _) = bpf::attach_best(&prog, info.index, iface, &info.driver, Some(bpf::XdpMode::Generic)).unwrap();
    (link, prog)
}

/// Serves the lab program on side a's interface (the server's socket lives in a's namespace).
fn serve(h: &TestHosts, scheme: &str) -> Server {
    let uri = format!("{scheme}://{}", h.a.iface);
    join(h.a.spawn(move || Server::builder().program(common::lab_program()).serve(&[&uri]).unwrap()), 10)
}

fn lab_procedures_with_discovery(scheme: &str) {
    let Some(h) = hosts() else { return };
    let server = serve(&h, scheme);
    let local = server.local_uris();
    assert_eq!(local, vec![format!("{scheme}://{}/{}", h.a.iface, h.a.mac)]);
    // No peer MAC: the client finds the server by broadcast.
    let uri = format!("{scheme}://{}", h.b.iface);
    // Every calling thread is started from a thread in b's namespace, so all of them (and the
    // channels they open) live there.
    let done = h.b.spawn(move || {
        let client = Arc::new(Client::connect(&uri, PROG, 1).unwrap());
        let sizes = [0usize, 1, 1400, 1440, 1500, 10_000, 100_000, 1 << 20];
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let c = client.clone();
                std::thread::spawn(move || {
                    check_lab_procedures(&c, t, &sizes);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    });
    join(done, 60);
    server.shutdown();
    // The client (dropped in its thread) and the server both detached their XDP programs.
    for side in [&h.a, &h.b] {
        let out = std::process::Command::new("ip").args(["-n", &side.ns, "link", "show", "dev", &side.iface]).output();
        let out = String::from_utf8_lossy(&out.unwrap().stdout).into_owned();
        assert!(out.contains(&side.iface) && !out.contains("prog/xdp"), "{out}");
    }
}

#[test]
fn lab_procedures_over_eth_with_discovery() {
    lab_procedures_with_discovery("eth");
}

#[test]
fn lab_procedures_over_xdp_with_discovery() {
    lab_procedures_with_discovery("xdp");
}

#[test]
fn calls_complete_through_corrupted_frames() {
    let Some(h) = hosts() else { return };
    let server = serve(&h, "eth");
    // One in eight frames reaching the server has a bit flipped: its CRC32C fails, the server
    // drops it, and the client's retransmission recovers.
    let iface = h.a.iface.clone();
    let corruptor = join(h.a.spawn(move || corrupt(&iface, 3)), 5);
    let uri = format!("eth://{}/{}", h.b.iface, h.a.mac);
    let done = h.b.spawn(move || {
        let cfg = ClientConfig { deadline: Duration::from_secs(20), ..ClientConfig::default() };
        let c = Client::connect_with(&uri, PROG, 1, cfg).unwrap();
        for i in 0..40u32 {
            assert!(bytes(NULL, &c, &[]).unwrap().is_empty());
            let msg: Vec<u8> = (0..(i as usize * 997) % 20_000).map(|j| j as u8).collect();
            assert!(bytes(ECHO, &c, &msg).unwrap() == msg);
        }
        let big: Vec<u8> = (0..300_000).map(|j| (j % 253) as u8).collect();
        assert!(bytes(ECHO, &c, &big).unwrap() == big);
    });
    join(done, 60);
    drop(corruptor);
    server.shutdown();
}

#[test]
fn checksums_off_on_both_ends_and_a_mismatch_is_a_timeout() {
    let Some(h) = hosts() else { return };
    for scheme in ["eth", "xdp"] {
        let uri = format!("{scheme}://{}", h.a.iface);
        let server = join(
            h.a.spawn(move || {
                let cfg = lowlat::ServerConfig { checksum: false, ..lowlat::ServerConfig::default() };
                Server::builder().program(common::lab_program()).config(cfg).serve(&[&uri]).unwrap()
            }),
            10,
        );
        let uri = format!("{scheme}://{}/{}", h.b.iface, h.a.mac);
        let done = h.b.spawn(move || {
            let off = ClientConfig { checksum: false, ..ClientConfig::default() };
            let c = Client::connect_with(&uri, PROG, 1, off).unwrap();
            let msg: Vec<u8> = (0..10_000).map(|j| j as u8).collect();
            assert!(bytes(ECHO, &c, &msg).unwrap() == msg);
            // A client that requires checksums drops the server's frames without one: it never
            // binds, and says so within its bind timeout. Over xdp this process already holds
            // the queue's one AF_XDP socket, without checksums: that is refused and said.
            let on = ClientConfig { bind_timeout: Duration::from_millis(300), ..ClientConfig::default() };
            let e = Client::connect_with(&uri, PROG, 1, on).unwrap_err().to_string();
            if uri.starts_with("xdp") {
                assert!(e.contains("checksums off"), "{e}");
            } else {
                assert!(e.contains("bind") || e.contains("answer"), "{e}");
            }
        });
        join(done, 30);
        server.shutdown();
    }
}

#[test]
fn missing_interface_and_absent_server_are_clear_errors() {
    let e = Client::connect("eth://nosuchif0/02:00:00:00:00:01", PROG, 1).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("ip link"), "{e}");
    let Some(h) = hosts() else { return };
    let uri = format!("eth://{}", h.b.iface);
    let e = join(
        h.b.spawn(move || {
            let cfg = ClientConfig { bind_timeout: Duration::from_millis(300), ..ClientConfig::default() };
            Client::connect_with(&uri, PROG, 1, cfg).unwrap_err()
        }),
        10,
    );
    assert!(matches!(e, Error::ServerNotRunning { .. }), "{e}");
}

/// An eth endpoint of four serving threads: binds spread over the threads (by their nonce),
/// and every frame of a session reaches the thread that holds it (the fanout group's steering
/// program reads the token): each thread counted exactly the binds in its token range, and
/// none a frame of a session it does not hold. Discovery is answered (by the first thread).
#[test]
fn an_eth_endpoint_of_four_threads_steers_each_session_to_its_thread() {
    const THREADS: usize = 4;
    let Some(h) = hosts() else { return };
    let uri = format!("eth://{}", h.a.iface);
    let cfg = lowlat::ServerConfig { threads: THREADS, ..lowlat::ServerConfig::default() };
    let server = join(
        h.a.spawn(move || Server::builder().program(common::lab_program()).config(cfg).serve(&[&uri]).unwrap()),
        10,
    );
    let uri = format!("eth://{}", h.b.iface);
    let owners = join(
        h.b.spawn(move || {
            let mut owners = [0usize; THREADS];
            for i in 0..16 {
                let c = Client::connect(&uri, PROG, 1).unwrap();
                for k in 0..10 {
                    assert_eq!(common::Lab::new(&c).minus(i, k).unwrap(), i - k);
                }
                owners[lowlat_proto::Shard::owner(c.session().token, THREADS as u16) as usize] += 1;
            }
            owners
        }),
        60,
    );
    assert!(owners.iter().filter(|&&n| n > 0).count() >= 2, "sessions on one thread only: {owners:?}");
    let per_thread = server.stats_per_thread();
    for (t, s) in per_thread[0].1.iter().enumerate() {
        assert_eq!(s.binds_granted as usize, owners[t], "thread {t}: {s:?}");
        assert_eq!(s.unknown_session, 0, "thread {t} got frames of sessions it does not hold");
    }
    assert_eq!(server.stats()[0].1.calls, 160);
}
