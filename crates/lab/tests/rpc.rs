//! The lab's benchmark over real loopback UDP and TCP. (Every procedure at edge sizes, many
//! threads, and every error path with its typed error are tested once for every transport by the
//! runtime's conformance suite, `crates/runtime/tests/suite/mod.rs`.)

use lowlat::{Server, ServerConfig};
use lowlat_lab::interface;

fn serve(scheme: &str, cfg: ServerConfig) -> (Server, String) {
    let server = Server::builder()
        .program(interface::program())
        .config(cfg)
        .serve(&[format!("{scheme}://127.0.0.1:0")])
        .expect("serve");
    let uri = server.local_uris()[0].clone();
    (server, uri)
}

/// Closed-loop throughput cannot exceed what the calls' own latencies allow (Little's law: calls
/// per second times mean latency is at most the number of calling threads). The benchmark once
/// timed its run from the thread that released the callers, which on two CPUs could be
/// scheduled again only after most calls were made: it reported 22M MAXRESULT(1440) calls/s.
#[test]
fn closed_loop_throughput_agrees_with_latency() {
    use lowlat_lab::bench::{self, BenchSpec};
    for scheme in ["udp", "tcp"] {
        let (server, uri) = serve(scheme, ServerConfig::default());
        for threads in [1usize, 2, 4] {
            let spec = BenchSpec { uri: uri.clone(), calls: 4_000, warmup: 200, threads, ..BenchSpec::default() };
            let s = bench::run(&spec).unwrap();
            assert_eq!((s.calls, s.errors), (4_000, 0), "{scheme} {threads}");
            let busy = s.calls_per_s * s.mean_ns as f64 * 1e-9;
            assert!(
                busy > 0.0 && busy <= threads as f64 * 1.05,
                "{scheme}, {threads} threads: {:.0} calls/s at a mean of {} ns is {busy:.2} calls in flight",
                s.calls_per_s,
                s.mean_ns
            );
        }
        server.shutdown();
    }
}

/// `BLOCK(us)` sleeps on the thread that received the call, as a careless inline procedure does:
/// it takes about `us`, a `NULL` call from another client sent while it sleeps on the endpoint's
/// one serving thread waits for it (what serving threads are judged by), and a sleep longer than
/// the lab allows is refused as garbage arguments, not slept.
#[test]
fn block_sleeps_on_the_thread_that_received_it() {
    use lowlat_lab::interface::LabClient;
    use std::time::{Duration, Instant};
    for scheme in ["udp", "tcp"] {
        let (server, uri) = serve(scheme, ServerConfig::default());
        let blocker = LabClient::connect(&uri, Default::default()).unwrap();
        let other = LabClient::connect(&uri, Default::default()).unwrap();
        other.null().unwrap();
        let t = Instant::now();
        blocker.block(20_000).unwrap();
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(20) && took < Duration::from_secs(2),
            "{scheme}: BLOCK(20 ms) took {took:?}"
        );

        let sleeping = std::thread::spawn(move || blocker.block(300_000));
        // Well inside the 300 ms sleep, on the one serving thread.
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        other.null().unwrap();
        let waited = t.elapsed();
        sleeping.join().unwrap().unwrap();
        assert!(waited >= Duration::from_millis(100), "{scheme}: a NULL call during a BLOCK took only {waited:?}");

        let e = other.block(2_000_000).unwrap_err();
        assert!(matches!(e, lowlat::Error::GarbageArgs { .. }), "{scheme}: {e}");
        server.shutdown();
    }
}
