//! The raw exchanges the ladder puts beside the RPC allocate nothing per message either. (Its own
//! binary: the counting allocator counts every thread's allocations, so no other test may run
//! beside it.)

use lowlat::SpinPolicy;
use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// The raw exchange the ladder puts beside the RPC allocates nothing per message either, with a
/// key or without (a baseline that allocated would flatter the RPC beside it): 1,000 more round
/// trips in a run allocate no more than a few more times (a connection's or a table's growth),
/// where one allocation per message would make it a thousand.
#[test]
fn raw_exchanges_do_not_allocate_per_message() {
    use lowlat_lab::pingpong::{self, PingPongServer, RawOptions};
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Stops the echo server however the test ends, so that a failed assertion is reported
    /// instead of leaving the scope waiting for the server for ever.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let key = lowlat::Psk::new(&[5u8; 32]).unwrap();
    for listen in ["udp://127.0.0.1:0", "tcp://127.0.0.1:0"] {
        for psk in [None, Some(&key)] {
            let server = PingPongServer::bind(listen, SpinPolicy::Forever, true, psk).unwrap();
            let uri = server.local_uri.clone();
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                let echo = s.spawn(|| server.run(&stop));
                let stopping = StopOnDrop(&stop);
                let run = |calls| pingpong::run(&uri, 32, calls, 0, SpinPolicy::Forever, RawOptions::default(), psk);
                run(200).unwrap(); // warm up
                let (_, fewer) = ALLOC.count(|| run(500).unwrap());
                let (_, more) = ALLOC.count(|| run(1500).unwrap());
                // Each run sets up its own socket and buffers; only the per-message part counts.
                assert!(
                    more <= fewer + 10,
                    "{listen}, key {}: {fewer} allocations for 500 round trips, {more} for 1500",
                    psk.is_some()
                );
                drop(stopping);
                echo.join().unwrap().unwrap();
            });
        }
    }
}
