#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lowlat_eth::FrameSocket;
use lowlat_testkit::testhosts::{self, TestHosts, TestHostsConfig};
use lowlat_wait::{SpinPolicy, Spinner};

/// The test hosts, or None (with the reason printed) when not root.
pub fn hosts(mtu: u32) -> Option<TestHosts> {
    if let Err(why) = testhosts::check_root() {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    Some(TestHosts::with_config(TestHostsConfig { mtu, ..TestHostsConfig::default() }).expect("creating test hosts"))
}

pub fn deadline(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

/// Joins a namespace thread, failing the test if it does not finish within `secs`.
pub fn join<T>(h: std::thread::JoinHandle<testhosts::Result<T>>, secs: u64) -> T {
    let end = deadline(secs);
    while !h.is_finished() {
        assert!(Instant::now() < end, "namespace thread did not finish within {secs} s");
        std::thread::sleep(Duration::from_millis(2));
    }
    h.join().expect("namespace thread panicked").expect("entering the namespace")
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Echoes every DATA or PING payload back to its sender until `stop` is set; returns how many.
pub fn echo_until(sock: &mut dyn FrameSocket, spin: SpinPolicy, stop: &AtomicBool) -> lowlat_eth::Result<u64> {
    let mut buf = vec![0u8; sock.max_payload()];
    let mut spinner = Spinner::new(spin);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        // Bounded waits, so that `stop` is noticed.
        if let Some((len, src)) = sock.recv_from(&mut buf, &mut spinner, Some(deadline_ms(50)))? {
            sock.send_to(src, &buf[..len], &[])?;
            n += 1;
        }
    }
    Ok(n)
}

fn deadline_ms(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}
