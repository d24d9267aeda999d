//! Many calls in flight from one thread allocate nothing per call, on the client or on the
//! server (both in this process; its own binary: the counting allocator counts every thread's
//! allocations, so no other test may run beside it).

use lowlat::{ClientConfig, Server, ServerConfig, SpinPolicy};
use lowlat_lab::interface::{self, LabClient, MINUS, NULL};
use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// `calls` calls of NULL and MINUS kept 16 in flight through a `lowlat::InFlight` (made once a
/// run: its allocations are the same in every run).
fn window(c: &LabClient, calls: usize) {
    let mut made = 0;
    let mut done = 0;
    let mut set = lowlat::InFlight::new(16);
    while done < calls {
        while made < calls && !set.is_full() {
            let proc = if made % 2 == 0 { NULL } else { MINUS };
            let _ = set.push(c.call_async(proc, &[], 0));
            made += 1;
        }
        done += set.wait(Some(std::time::Duration::from_secs(10)), |_, r| r.expect("a call in flight failed"));
    }
}

/// With 16 calls in flight, 2,000 more calls allocate no more than a few times more (a table's
/// growth), where one allocation per call would make it thousands: busy-polling, and with calls
/// that never spin (`SpinPolicy::Block`), each parked in the reactor with its deadline.
#[test]
fn calls_in_flight_do_not_allocate_per_call() {
    let dir = std::env::temp_dir().join(format!("lowlat-alloc-in-flight-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (n, client_spin) in [SpinPolicy::Forever, SpinPolicy::Block].into_iter().enumerate() {
        let shm = format!("shm://{}", dir.join(format!("s{n}")).display());
        for listen in ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", shm.as_str()] {
            let config = ServerConfig { spin: SpinPolicy::Forever, ..Default::default() };
            let server = Server::builder().program(interface::program()).config(config).serve(&[listen]).unwrap();
            let uri = server.local_uris()[0].clone();
            let c = LabClient::connect(&uri, ClientConfig { spin: client_spin, ..ClientConfig::default() }).unwrap();
            // Every slot's channel opened and every buffer grown first.
            window(&c, 2_000);
            let ((), few) = ALLOC.count(|| window(&c, 500));
            let ((), many) = ALLOC.count(|| window(&c, 2_500));
            assert!(
                many <= few + 8,
                "{listen}, client spin {client_spin}: {few} allocations in 500 calls in flight, {many} in 2,500"
            );
            server.shutdown();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
