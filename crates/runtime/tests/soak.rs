//! At-most-once on real sockets: many COUNT calls (a non-idempotent procedure: it increments a
//! server-wide counter and returns the new value) from several threads through a relay that
//! drops, duplicates, reorders and corrupts datagrams both ways. Every call must succeed or fail
//! with a typed error saying whether it may have executed; no value may come back twice; the
//! server's counter must lie between the successes and the successes plus the failures that may
//! have executed; nothing may hang.
//!
//! Over udp:// through `lowlat relay`'s UDP relay; over eth:// and xdp:// (as root) through a
//! frame relay in a namespace between the client's and the server's.
//!
//! `LOWLAT_SOAK_CALLS` sets the number of calls over udp:// (20,000 by default; `scripts/soak.sh`
//! runs a million), `LOWLAT_FRAME_SOAK_CALLS` over eth:// and xdp:// (5,000 by default).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Program, Server};
use lowlat_relay::{Delay, Faults, FrameRelay, Probability, RelayThread};
use lowlat_testkit::testhosts::{self, TestHosts, TestHostsConfig};

const PROG: u32 = 0x2000_50AC;
const COUNT: u32 = 1;
const THREADS: usize = 4;

fn p(x: f64) -> Probability {
    Probability::new(x).unwrap()
}

/// What one calling thread saw.
#[derive(Default)]
struct Seen {
    values: Vec<u64>,
    /// Failures by error kind, and whether each may have executed.
    failures: HashMap<&'static str, (u64, u64)>,
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::Timeout { .. } => "timeout",
        Error::Busy { .. } => "busy",
        Error::SessionLost { .. } => "session lost",
        Error::ServerRestarted { .. } => "server restarted",
        Error::ConnectionLost { .. } => "connection lost",
        _ => "other",
    }
}

/// The server's program: COUNT, counting in `counter`.
fn counting_program(counter: Arc<AtomicU64>) -> Program {
    Program::new(PROG, 1).procedure(COUNT, "COUNT", move |_, a, r| {
        if !a.is_empty() {
            return Err(lowlat::ProcError::GarbageArgs);
        }
        r.extend_from_slice(&(counter.fetch_add(1, Ordering::SeqCst) + 1).to_ne_bytes());
        Ok(())
    })
}

/// The relay's faults: 5% drop, duplication and reordering, 1% corruption, up to 200 µs delay.
fn faults() -> Faults {
    Faults {
        drop: p(0.05),
        dup: p(0.05),
        reorder: p(0.05),
        corrupt: p(0.01),
        delay: Delay::Uniform(Duration::ZERO, Duration::from_micros(200)),
        seed: 20261125,
    }
}

/// Calls from [`THREADS`] threads making `calls` COUNT calls in all at `uri`.
struct Calls {
    values: Vec<u64>,
    failures: HashMap<&'static str, (u64, u64)>,
    wall: Duration,
}

impl Calls {
    fn make(uri: &str, calls: usize) -> Calls {
        let cfg = ClientConfig { slots: THREADS as u16, deadline: Duration::from_secs(2), ..ClientConfig::default() };
        let client = Arc::new(Client::connect_with(uri, PROG, 1, cfg).unwrap());
        let began = Instant::now();
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let client = client.clone();
                let n = calls / THREADS + usize::from(t < calls % THREADS);
                std::thread::spawn(move || {
                    let mut seen = Seen::default();
                    for _ in 0..n {
                        let r = client.call::<_, lowlat::DecodeError>(
                            COUNT,
                            |_| Ok(()),
                            |r| {
                                let b: [u8; 8] = r.try_into().map_err(|_| lowlat::DecodeError::new("u64", r.len()))?;
                                Ok(u64::from_ne_bytes(b))
                            },
                        );
                        match r {
                            Ok(v) => seen.values.push(v),
                            Err(e) => {
                                let f = seen.failures.entry(kind(&e)).or_default();
                                f.0 += 1;
                                f.1 += e.may_have_executed() as u64;
                                assert_ne!(kind(&e), "other", "an untyped failure: {e}");
                            }
                        }
                    }
                    seen
                })
            })
            .collect();
        let end = Instant::now() + Duration::from_secs(600);
        let mut values = Vec::with_capacity(calls);
        let mut failures: HashMap<&'static str, (u64, u64)> = HashMap::new();
        for h in threads {
            while !h.is_finished() {
                assert!(Instant::now() < end, "the soak hung");
                std::thread::sleep(Duration::from_millis(10));
            }
            let seen = h.join().unwrap();
            values.extend(seen.values);
            for (k, (n, maybe)) in seen.failures {
                let f = failures.entry(k).or_default();
                f.0 += n;
                f.1 += maybe;
            }
        }
        Calls { values, failures, wall: began.elapsed() }
    }

    /// Prints the figures (`what`: the transport and the relay's report) and checks that
    /// nothing executed twice: every call accounted for, no value returned twice, the server's
    /// count between the successes and the successes plus the failures that may have executed.
    fn check(mut self, calls: usize, executed: u64, what: &str) {
        let Calls { values, failures, wall } = &mut self;
        let successes = values.len() as u64;
        let failed: u64 = failures.values().map(|f| f.0).sum();
        let may_have: u64 = failures.values().map(|f| f.1).sum();
        eprintln!(
            "soak: {calls} COUNT calls from {THREADS} threads in {wall:.1?}: {successes} succeeded, {failed} failed \
             ({failures:?}: (failed, may have executed)); the server executed {executed}\n{what}"
        );
        assert_eq!(successes + failed, calls as u64);
        values.sort_unstable();
        let dup = values.windows(2).find(|w| w[0] == w[1]);
        assert!(dup.is_none(), "value {:?} returned twice", dup.map(|w| w[0]));
        assert!(values.last().is_none_or(|&v| v <= executed), "a value above the counter");
        assert!(executed >= successes, "{executed} executions for {successes} successes");
        assert!(
            executed <= successes + may_have,
            "{executed} executions: more than the {successes} successes and {may_have} failures that may have executed"
        );
    }
}

#[test]
fn count_calls_through_a_faulty_relay_execute_at_most_once() {
    through_a_relay(1);
}

/// The same against four serving threads.
#[test]
fn count_calls_through_a_faulty_relay_execute_at_most_once_with_four_threads() {
    through_a_relay(4);
}

fn through_a_relay(threads: usize) {
    let calls: usize = std::env::var("LOWLAT_SOAK_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let counter = Arc::new(AtomicU64::new(0));
    let server = Server::builder()
        .program(counting_program(counter.clone()))
        .config(lowlat::ServerConfig { threads, ..lowlat::ServerConfig::default() })
        .serve(&["udp://127.0.0.1:0"])
        .unwrap();
    let target = server.local_uris()[0].trim_start_matches("udp://").parse().unwrap();
    let relay = RelayThread::start("127.0.0.1:0".parse().unwrap(), target, faults()).unwrap();
    let calls_made = Calls::make(&format!("udp://{}", relay.addr()), calls);
    let report = relay.stop().unwrap();
    server.shutdown();
    calls_made.check(calls, counter.load(Ordering::SeqCst), &format!("udp, {threads} serving threads\n{report}"));
    assert!(report.to_target.dropped > 0 && report.to_target.corrupted > 0 && report.to_clients.duplicated > 0);
}

#[test]
fn count_calls_over_eth_through_a_faulty_frame_relay_execute_at_most_once() {
    through_a_frame_relay("eth");
}

#[test]
fn count_calls_over_xdp_through_a_faulty_frame_relay_execute_at_most_once() {
    through_a_frame_relay("xdp");
}

/// Joins `h` (a thread in a test namespace), failing the test after `secs`.
fn join_within<T>(h: std::thread::JoinHandle<testhosts::Result<T>>, secs: u64, what: &str) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    while !h.is_finished() {
        assert!(Instant::now() < end, "{what} did not finish within {secs} s");
        std::thread::sleep(Duration::from_millis(10));
    }
    match h.join() {
        Ok(r) => r.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// The soak over raw frames (`scheme`: eth or xdp): the server in one namespace, the client in
/// another, and between them a third whose frame relay drops, duplicates, reorders, delays and
/// corrupts frames both ways. Corrupted frames must be caught by the frames' CRC32C (the
/// server counts them). `LOWLAT_FRAME_SOAK_CALLS` sets the calls (5,000 by default). Needs
/// root: skipped otherwise.
fn through_a_frame_relay(scheme: &str) {
    if let Err(why) = testhosts::check_root() {
        return eprintln!("SKIPPED ({scheme}): {why}");
    }
    let calls: usize = std::env::var("LOWLAT_FRAME_SOAK_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000);
    let hosts = TestHosts::with_config(TestHostsConfig { relay: true, ..TestHostsConfig::default() }).unwrap();
    let between = hosts.relay.clone().expect("a namespace between");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_relay = stop.clone();
    let (toward_a, toward_b) = (between.toward_a.clone(), between.toward_b.clone());
    let relay =
        between.spawn(move || FrameRelay::open(&toward_a, &toward_b, faults()).and_then(|r| r.run(&stop_relay)));
    let counter = Arc::new(AtomicU64::new(0));
    let program = counting_program(counter.clone());
    let listen = format!("{scheme}://{}", hosts.a.iface);
    let server =
        join_within(hosts.a.spawn(move || Server::builder().program(program).serve(&[&listen])), 10, "serving")
            .expect("serving");
    let uri = format!("{scheme}://{}/{}", hosts.b.iface, hosts.a.mac);
    let calls_made = join_within(hosts.b.spawn(move || Calls::make(&uri, calls)), 900, "the calls");
    stop.store(true, Ordering::Release);
    let report = join_within(relay, 10, "the relay").expect("relaying frames");
    let caught: u64 = server.stats().iter().map(|(_, s)| s.checksum_failures).sum();
    server.shutdown();
    let what = format!(
        "{scheme} through a frame relay (first: the server's side); the server dropped {caught} frames for their \
         CRC32C\n{report}"
    );
    calls_made.check(calls, counter.load(Ordering::SeqCst), &what);
    let (up, down) = (report.second_to_first, report.first_to_second);
    assert!(up.dropped > 0 && up.duplicated > 0 && up.reordered > 0 && down.dropped > 0, "{what}");
    assert!(up.corrupted > 0 && caught > 0, "corrupted frames reached the server and its CRC32C caught them: {what}");
}
