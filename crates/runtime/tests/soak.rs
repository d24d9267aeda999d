//! At-most-once on real sockets: many calls of the lab's COUNT (a non-idempotent procedure: it increments a
//! server-wide counter and returns the new value) from several threads through a relay that
//! drops, duplicates, reorders and corrupts datagrams both ways. Every call must succeed or fail
//! with a typed error saying whether it may have executed; no value may come back twice; the
//! server's counter must lie between the successes and the successes plus the failures that may
//! have executed; nothing may hang.
//!
//! `LOWLAT_SOAK_CALLS` sets the number of calls (20,000 by default; `scripts/soak.sh` runs a
//! million).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Server};
use lowlat_relay::{Delay, Faults, Probability, RelayThread};

mod common;
use common::{Encoding, Lab};

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

#[test]
fn count_calls_through_a_faulty_relay_execute_at_most_once() {
    let calls: usize = std::env::var("LOWLAT_SOAK_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    // The lab's COUNT, as `lowlat serve` serves it.
    let (program, counter) = common::lab_program_counting(Encoding::Native);
    let server = Server::builder().program(program).serve(&["udp://127.0.0.1:0"]).unwrap();
    let target = server.local_uris()[0].trim_start_matches("udp://").parse().unwrap();
    let faults = Faults {
        drop: p(0.05),
        dup: p(0.05),
        reorder: p(0.05),
        corrupt: p(0.01),
        delay: Delay::Uniform(Duration::ZERO, Duration::from_micros(200)),
        seed: 20261125,
    };
    let relay = RelayThread::start("127.0.0.1:0".parse().unwrap(), target, faults).unwrap();
    let uri = format!("udp://{}", relay.addr());
    let cfg = ClientConfig { slots: THREADS as u16, deadline: Duration::from_secs(2), ..ClientConfig::default() };
    let client = Arc::new(Client::connect_with(&uri, common::PROG, 1, cfg).unwrap());
    let began = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let client = client.clone();
            let n = calls / THREADS + usize::from(t < calls % THREADS);
            std::thread::spawn(move || {
                let mut seen = Seen::default();
                for _ in 0..n {
                    let r = Lab::new(&client).count();
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
    let wall = began.elapsed();
    let report = relay.stop().unwrap();
    server.shutdown();

    let executed = counter.load(Ordering::SeqCst);
    let successes = values.len() as u64;
    let failed: u64 = failures.values().map(|f| f.0).sum();
    let may_have: u64 = failures.values().map(|f| f.1).sum();
    eprintln!(
        "soak: {calls} COUNT calls from {THREADS} threads in {wall:.1?}: {successes} succeeded, {failed} failed \
         ({failures:?}: (failed, may have executed)); the server executed {executed}\n{report}"
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
    assert!(report.to_target.dropped > 0 && report.to_target.corrupted > 0 && report.to_clients.duplicated > 0);
}
