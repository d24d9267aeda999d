//! The shared-memory transport beside its baselines on this machine, caller pinned to CPU 0 and
//! echoer to CPU 1, in threads of one process: the machine's floor (one message each way through
//! cache lines, [`lowlat_lab::raw::shm_floor`]) and a futex ping-pong (both sides blocking), then the ring
//! exchange spinning, adaptive and blocking, alone and beside 100 idle bindings, and what a
//! binding costs to set up. `cargo run --release -p lowlat-lab --example shm_baselines [ROUNDS]`
//! (the two-process figures are `lowlat pingpong`'s: `scripts/measure-shm.sh`).
//!
//! `shm_baselines futex ROUNDS` prints only the futex ping-pong.
//!
//! `shm_baselines hold PATH N SECONDS` instead opens N bindings to the server at PATH and leaves
//! them idle for SECONDS (to measure a server with idle bindings, e.g. `lowlat serve shm://PATH`).
//!
//! `shm_baselines awake GAP_NS ROUNDS` calls an adaptive echo server every GAP_NS nanoseconds
//! (inside its 5 µs spin budget) and counts the calls that found the binding asleep (armed): each
//! pays a wake-up, and an honest server arms a binding only when it really was idle that long.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lowlat_lab::raw::{shm_floor as floor, shm_pingpong as pingpong};
use lowlat_shm::{ChannelConfig, ShmChannel, ShmServer, ShmServerConfig, SpinPolicy};

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 * p) as usize).min(v.len() - 1);
    v[i].as_nanos() as f64 / 1000.0
}

fn report(name: &str, mut v: Vec<Duration>) -> f64 {
    // The first tenth warms caches and the adaptive spinners.
    let mut v = v.split_off(v.len() / 10);
    let p50 = pct(&mut v, 0.5);
    println!("{name:<44} p50 {p50:>7.2} µs  p99 {:>7.2} µs  max {:>8.1} µs", pct(&mut v, 0.99), pct(&mut v, 1.0));
    p50
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("hold") {
        let usage = "usage: shm_baselines hold PATH N SECONDS";
        let path = args.get(2).expect(usage);
        let n: usize = args.get(3).and_then(|a| a.parse().ok()).expect(usage);
        let secs: u64 = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
        let held: Vec<ShmChannel> =
            (0..n).map(|_| ShmChannel::connect(path, ChannelConfig::default()).unwrap()).collect();
        println!("holding {} idle bindings", held.len());
        std::thread::sleep(Duration::from_secs(secs));
        return;
    }
    if args.get(1).map(String::as_str) == Some("awake") {
        let usage = "usage: shm_baselines awake GAP_NS ROUNDS";
        let gap = Duration::from_nanos(args.get(2).and_then(|a| a.parse().ok()).expect(usage));
        let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).expect(usage);
        awake(gap, rounds);
        return;
    }
    let cpus = (Some(0), Some(1));
    if args.get(1).map(String::as_str) == Some("futex") {
        let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).expect("usage: shm_baselines futex ROUNDS");
        report("futex ping-pong (both blocking)", pingpong::futex_pingpong(rounds, cpus).unwrap());
        return;
    }
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let dir = std::env::temp_dir().join(format!("llshm-baselines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for size in [32, 1024] {
        let path = dir.join(format!("floor-{size}"));
        let stop = Arc::new(AtomicBool::new(false));
        let echoer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let _ = lowlat_sys::pin_to_cpu(1);
                floor::serve(&path, &stop).unwrap();
            })
        };
        while !path.exists() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = lowlat_sys::pin_to_cpu(0);
        let v = floor::run(&path, size, rounds, Duration::from_secs(5)).unwrap();
        report(&format!("floor {size} B (cache lines, both spinning)"), v);
        stop.store(true, Ordering::SeqCst);
        echoer.join().unwrap();
    }
    report("futex ping-pong (both blocking)", pingpong::futex_pingpong(rounds / 4, cpus).unwrap());

    let path = dir.join("s");
    for (name, spin, idle) in [
        ("ring echo 32 B, spinning", SpinPolicy::Forever, 0),
        ("ring echo 32 B, adaptive", SpinPolicy::Adaptive, 0),
        ("ring echo 32 B, blocking", SpinPolicy::Block, 0),
        ("ring echo 32 B, spinning, +100 idle bindings", SpinPolicy::Forever, 100),
        ("ring echo 32 B, adaptive, +100 idle bindings", SpinPolicy::Adaptive, 100),
    ] {
        let server = EchoThread::start(&path, ShmServerConfig { spin, ..ShmServerConfig::default() });
        let _ = lowlat_sys::pin_to_cpu(0);
        let idle: Vec<ShmChannel> =
            (0..idle).map(|_| ShmChannel::connect(&path, ChannelConfig::default()).unwrap()).collect();
        let n = if spin == SpinPolicy::Block { rounds / 4 } else { rounds };
        let cfg = ChannelConfig { spin, ..ChannelConfig::default() };
        let v = pingpong::run(&path, cfg.clone(), 32, n, Duration::from_secs(5)).unwrap();
        report(name, v);
        if idle.is_empty() {
            // The first call after 10 ms of silence: both sides have gone to sleep.
            let mut ch = ShmChannel::connect(&path, cfg).unwrap();
            let v: Vec<Duration> = (0..110)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(10));
                    let t = std::time::Instant::now();
                    ch.call(&[&[0u8; 32]], t + Duration::from_secs(5)).unwrap();
                    t.elapsed()
                })
                .collect();
            report(&format!("{name}, after 10 ms idle"), v);
        }
        drop(idle);
        server.stop();
    }
    // What a binding costs to set up: connect, credentials, memfd, seals, two double mappings
    // per side, descriptor passing.
    let server = EchoThread::start(&path, ShmServerConfig::default());
    let v: Vec<Duration> = (0..500)
        .map(|_| {
            let t = std::time::Instant::now();
            let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
            ch.call(&[b"x"], t + Duration::from_secs(5)).unwrap();
            t.elapsed()
        })
        .collect();
    report("bind (connect + first call, 64 KiB rings)", v);
    // Of which: the memfd and the mappings (each side maps the control page and both data
    // areas twice, which is what spares the rings a wrap-around padding record).
    let layout = lowlat_shm::Layout { call_ring: 64 << 10, result_ring: 64 << 10 };
    let v: Vec<Duration> = (0..500)
        .map(|_| {
            let t = std::time::Instant::now();
            let (seg, fd) = lowlat_shm::segment::Segment::create(layout).unwrap();
            let peer = lowlat_shm::segment::Segment::map(&fd, layout).unwrap();
            drop((seg, peer, fd));
            t.elapsed()
        })
        .collect();
    report("segment create + map both sides + unmap", v);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Calls an adaptive echo server every `gap` and reports how many calls found the binding asleep.
fn awake(gap: Duration, rounds: usize) {
    let dir = std::env::temp_dir().join(format!("llshm-awake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s");
    let server = EchoThread::start(&path, ShmServerConfig::default());
    let _ = lowlat_sys::pin_to_cpu(0);
    let mut ch =
        ShmChannel::connect(&path, ChannelConfig { spin: SpinPolicy::Forever, ..ChannelConfig::default() }).unwrap();
    let calls = ch.segment().call();
    let mut asleep = 0;
    for i in 0..rounds {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < gap {
            std::hint::spin_loop();
        }
        // Past the first calls the adaptive budget has settled at its floor.
        if i >= 100 && calls.ctl().consumer_sleeping.v.load(Ordering::SeqCst) != 0 {
            asleep += 1;
        }
        ch.call(&[b"x"], std::time::Instant::now() + Duration::from_secs(5)).unwrap();
    }
    drop(ch);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
    println!("calls every {gap:?}: {asleep} of {} found the binding asleep", rounds.saturating_sub(100));
}

/// An echo server on its own thread, pinned to CPU 1.
struct EchoThread {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl EchoThread {
    fn start(path: &std::path::Path, config: ShmServerConfig) -> EchoThread {
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = ShmServer::bind(path, config).unwrap();
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let _ = lowlat_sys::pin_to_cpu(1);
            server.run(&mut pingpong::echo, &s2).unwrap();
        });
        EchoThread { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}
