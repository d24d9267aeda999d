//! A steady-state call allocates nothing with a `tracing` subscriber installed at INFO (the
//! command line's: `fmt` with an `EnvFilter`), spans off: lowlat emits no event per call, and
//! with spans off enters none. (`alloc.rs` is the same without a subscriber; a process has one
//! global subscriber, hence a test binary of its own.)

mod common;

use lowlat::{ClientConfig, Server, ServerConfig};
use lowlat_lab::interface::{self, LabClient};
use lowlat_testkit::CountingAlloc;
use tracing::Level;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

#[test]
fn steady_state_calls_do_not_allocate_with_a_subscriber_at_info() {
    tracing_subscriber::fmt().with_env_filter(EnvFilter::new("info")).with_writer(std::io::stderr).init();
    assert!(tracing::enabled!(target: "lowlat::server", Level::INFO), "the subscriber takes lowlat's events");
    assert!(!tracing::enabled!(target: "lowlat::server", Level::DEBUG));

    let dir = std::env::temp_dir().join(format!("lowlat-alloc-logging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shm = format!("shm://{}", dir.join("s").display());
    for (scheme, spin, n) in
        common::steady_state(&ALLOC, &[("udp", "udp://127.0.0.1:0"), ("shm", shm.as_str())], 1024, false, false)
    {
        assert_eq!(n, 0, "{scheme} {spin}: {n} allocations in 3000 steady-state calls with a subscriber at info");
    }
    let _ = std::fs::remove_dir_all(&dir);

    // The counter sees the subscriber's work: with spans on, each call's spans are recorded
    // (the `fmt` subscriber formats their fields into a string it keeps while they are open).
    let server = Server::builder()
        .program(interface::program())
        .config(ServerConfig { spans: true, ..Default::default() })
        .serve(&["udp://127.0.0.1:0"])
        .unwrap();
    let c =
        LabClient::connect(&server.local_uris()[0], ClientConfig { spans: true, ..ClientConfig::default() }).unwrap();
    let (arg, mut out) = (vec![7u8; 1024], Vec::with_capacity(4096));
    common::calls(&c, &arg, &mut out, 200, false);
    let ((), n) = ALLOC.count(|| common::calls(&c, &arg, &mut out, 100, false));
    assert!(n >= 300, "spans on: {n} allocations in 300 calls");
    server.shutdown();
}
