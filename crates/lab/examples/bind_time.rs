//! What a binding costs an honest client: the time from `Client::connect` to a bound session
//! (over datagrams: the bind, the server's cookie round, the bind again), beside a null call's
//! round trip on the same transport, measured in one run.
//!
//! `cargo run --release -p lowlat-lab --example bind_time URI [BINDS] [PSK-FILE]`
//!
//! Serve first (`lowlat serve URI`, with `--psk-file` to match). Prints p50 and p99 of the bind
//! and of the null call, and the bind's p50 in null-call round trips.

use std::time::{Duration, Instant};

use lowlat_lab::interface::LabClient;

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let uri = args.next().ok_or("usage: bind_time URI [BINDS] [PSK-FILE]")?;
    let binds: usize = args.next().map_or(Ok(2000), |s| s.parse()).map_err(|e| format!("BINDS: {e}"))?;
    let psk = args.next().map(lowlat::read_psk_file).transpose().map_err(|e| e.to_string())?;
    let cfg = lowlat::ClientConfig { slots: 1, psk, ..lowlat::ClientConfig::default() };
    let warm = LabClient::connect(&uri, cfg.clone()).map_err(|e| e.to_string())?;
    let (mut bind_us, mut call_us) = (Vec::with_capacity(binds), Vec::with_capacity(binds));
    for _ in 0..binds {
        let t = Instant::now();
        let c = LabClient::connect(&uri, cfg.clone()).map_err(|e| e.to_string())?;
        bind_us.push(t.elapsed().as_secs_f64() * 1e6);
        drop(c);
        let t = Instant::now();
        warm.null().map_err(|e| e.to_string())?;
        call_us.push(t.elapsed().as_secs_f64() * 1e6);
        // Unused sessions are reclaimed by the server; give it no reason to refuse.
        std::thread::sleep(Duration::from_micros(100));
    }
    let (b50, b99) = (percentile(&mut bind_us, 0.5), percentile(&mut bind_us, 0.99));
    let (c50, c99) = (percentile(&mut call_us, 0.5), percentile(&mut call_us, 0.99));
    println!("{uri}: bind p50 {b50:.1} µs p99 {b99:.1} µs; null call p50 {c50:.1} µs p99 {c99:.1} µs; bind = {:.2} null calls", b50 / c50);
    Ok(())
}
