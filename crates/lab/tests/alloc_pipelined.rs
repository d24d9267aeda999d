//! Pipelined exchanges allocate nothing per message. (Its own binary: the counting allocator
//! counts every thread's allocations, so no other test may run beside it.)

use lowlat::SpinPolicy;
use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// Pipelined exchanges allocate nothing per message either: buffers, windows and batches are
/// built before the first exchange.
#[test]
fn pipelined_exchanges_do_not_allocate_per_message() {
    use lowlat_lab::pingpong::{run_pipelined, PingPongServer, PipelineOptions};
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = std::env::temp_dir().join(format!("lowlat-alloc-pipelined-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shm = format!("shm://{}", dir.join("s").display());
    let shm_floor = format!("shm://{}", dir.join("f").display());
    let servers = [
        (PingPongServer::bind_floor(&shm_floor, SpinPolicy::Forever).unwrap(), true),
        (PingPongServer::bind_floor("udp://127.0.0.1:0", SpinPolicy::Forever).unwrap(), true),
        (PingPongServer::bind(&shm, SpinPolicy::Forever, true, None).unwrap(), false),
        (PingPongServer::bind("udp://127.0.0.1:0", SpinPolicy::Forever, true, None).unwrap(), false),
        (PingPongServer::bind("tcp://127.0.0.1:0", SpinPolicy::Forever, true, None).unwrap(), false),
    ];
    for (server, floor) in servers {
        let uri = server.local_uri.clone();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let echo = s.spawn(|| server.run(&stop));
            let opts = PipelineOptions { floor, warmup: 100, ..Default::default() };
            let run = |n| run_pipelined(&uri, 32, n, 16, opts);
            let counted = (|| {
                run(200)?;
                let (_, fewer) = ALLOC.count(|| run(500).map(drop));
                let (_, more) = ALLOC.count(|| run(1500).map(drop));
                Ok::<_, lowlat_lab::pingpong::PingPongError>((fewer, more))
            })();
            stop.store(true, Ordering::Relaxed);
            echo.join().unwrap().unwrap();
            let (fewer, more) = counted.unwrap();
            assert!(more <= fewer + 10, "{uri}, floor {floor}: {fewer} allocations for 500 exchanges, {more} for 1500");
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}
