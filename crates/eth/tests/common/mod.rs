#![allow(dead_code)]

use std::time::{Duration, Instant};

use lowlat_eth::testhosts::{self, TestHosts, TestHostsConfig};

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
pub fn join<T>(h: std::thread::JoinHandle<lowlat_eth::Result<T>>, secs: u64) -> T {
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
