//! Saturation (DESIGN principle 13; Riddoch's per-request cost; Lampson's r = s/(1-u)): per
//! transport, lowlat's null calls per second with W = 1, 4, 16 and 64 calls kept in flight by
//! one caller thread (`bench --in-flight W`), beside the machine's throughput floor at the same
//! W (`pingpong --floor --in-flight W`: shm and udp have one, tcp has none), with the server's
//! CPU per call read from its serving thread's clock; then open-loop latency at fractions u of
//! the saturated rate (the most calls per second of any W), beside r = s/(1-u) with s the median
//! of single unloaded calls.
//!
//! Both sides of the closed loops busy-poll, as the floor does: the figures are what one caller
//! core drives against one serving core (the open loop's caller spins adaptively, as the load
//! section's). The floor's server is stopped before lowlat's starts, so the two never
//! share the server's CPU. Each closed-loop run aims at the scale's saturation time, its count
//! sized from the rate the run before it measured: the shm floor at W = 64 moves a thousand
//! times more exchanges per second than tcp at W = 1, and a fixed count would measure one for
//! microseconds or the other for minutes.

use std::time::Instant;

use lowlat::SpinPolicy;
use lowlat_report::{Results, SaturationRow, SaturationSeries};

use super::load::{offer, UTILISATIONS};
use crate::bench::{self, BenchSpec};
use crate::pingpong::{run_pipelined, PipelineOptions};
use crate::run::lab::Lab;

/// The calls kept in flight, as the issue asks them.
const WINDOWS: [usize; 4] = [1, 4, 16, 64];

/// Bytes of each floor message: the size of a null call's header.
const FLOOR_SIZE: usize = 32;

/// The closed loops' callers and every server poll without ever blocking (the floor always
/// does).
const SPIN: SpinPolicy = SpinPolicy::Forever;

/// The open loop's caller spins as the load section's does: a sender that polls for every
/// reply without end falls behind its own schedule sooner (in one `lab --quick` on this VM,
/// with other work on its CPUs, 77-100% of its sends went late at every u; spinning adaptively,
/// 20-95% in the next run).
const OPEN_LOOP_SPIN: SpinPolicy = SpinPolicy::Adaptive;

/// No run makes more than this many exchanges, whatever the rate it is sized from.
const MAX_COUNT: u64 = 200_000_000;

/// The transports, in the order they run.
const TRANSPORTS: [&str; 3] = ["shm", "udp", "tcp"];

/// Progress steps: the floor and lowlat's calls, per transport.
pub(crate) const STEPS: u64 = 2 * TRANSPORTS.len() as u64;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for scheme in TRANSPORTS {
        results.saturation.push(series(lab, scheme));
    }
}

/// The floor's exchange for `scheme`, in words, or why there is none.
fn floor_of(scheme: &str) -> Result<&'static str, &'static str> {
    match scheme {
        "shm" => Ok("rings of one-line records, data then flag, W records ahead (pingpong --floor)"),
        "udp" => Ok("a connected client sending with sendmmsg against an echo with recvmmsg/sendmmsg in batches \
                     of 32 (pingpong --floor)"),
        _ => Err("no throughput floor: the machine's simplest pipelined exchange is defined for shared memory \
                  and udp (DESIGN principle 13), not for a byte stream; lowlat's calls/s stand alone"),
    }
}

/// Runs `run` with `first` exchanges; if that took less than half of `seconds` by the rate it
/// measured, once more with as many as fill `seconds`. `run` returns its result and rate.
fn timed<T>(
    first: u64,
    seconds: f64,
    mut run: impl FnMut(u64) -> Result<(T, f64), String>,
) -> Result<(T, f64), String> {
    let (t, per_s) = run(first)?;
    if first as f64 >= per_s * seconds / 2.0 {
        return Ok((t, per_s));
    }
    run(((per_s * seconds) as u64).clamp(first, MAX_COUNT))
}

/// The count that fills `seconds` at twice `per_s`, the rate the previous W measured: more
/// calls in flight rarely more than double the rate, and a run that turns out short is
/// repeated longer by [`timed`].
fn next_count(per_s: f64, seconds: f64, min: u64) -> u64 {
    ((2.0 * per_s * seconds) as u64).clamp(min, MAX_COUNT)
}

/// One transport's series: the floor's rows, lowlat's rows, then the open loop against the
/// saturated rate.
fn series(lab: &mut Lab, scheme: &str) -> SaturationSeries {
    let began = Instant::now();
    let mut s = SaturationSeries {
        transport: scheme.into(),
        proc: "null".into(),
        size: 0,
        floor: None,
        no_floor: None,
        floor_size: FLOOR_SIZE as u32,
        rows: WINDOWS.iter().map(|&w| empty_row(w)).collect(),
        service_ns: None,
        saturated_calls_per_s: None,
        saturated_in_flight: None,
        points: Vec::new(),
        skipped: None,
        seconds: 0.0,
    };
    // What went wrong with each row, joined into its `skipped` at the end.
    let mut notes: Vec<Vec<String>> = vec![Vec::new(); WINDOWS.len()];
    lab.step(&format!("saturation: {scheme} floor"));
    match floor_of(scheme) {
        Ok(what) => {
            s.floor = Some(what.into());
            floors(lab, scheme, &mut s.rows, &mut notes);
        }
        Err(why) => s.no_floor = Some(why.into()),
    }
    lab.step(&format!("saturation: {scheme} calls"));
    if let Err(e) = calls(lab, scheme, &mut s, &mut notes) {
        s.skipped = Some(e);
    }
    for (row, n) in s.rows.iter_mut().zip(notes) {
        row.over_floor = SaturationRow::over(row.calls_per_s, row.floor_exchanges_per_s);
        if !n.is_empty() {
            row.skipped = Some(n.join("; "));
        }
    }
    s.seconds = began.elapsed().as_secs_f64();
    s
}

fn empty_row(w: usize) -> SaturationRow {
    SaturationRow {
        in_flight: w as u32,
        calls_per_s: None,
        p50_ns: None,
        p99_ns: None,
        server_cpu_ns_per_call: None,
        floor_exchanges_per_s: None,
        floor_server_cpu_ns_per_exchange: None,
        floor_client_cpu_ns_per_exchange: None,
        over_floor: None,
        skipped: None,
    }
}

/// The floor at every W, into `rows`; a failure becomes its row's note.
fn floors(lab: &mut Lab, scheme: &str, rows: &mut [SaturationRow], notes: &mut [Vec<String>]) {
    let (_srv, uri) = match lab.floor_server(scheme, SPIN) {
        Ok(s) => s,
        Err(e) => {
            notes.iter_mut().for_each(|n| n.push(format!("floor: {e}")));
            return;
        }
    };
    lab.pin_client();
    let seconds = lab.scale.saturation_seconds;
    let mut count = lab.scale.calls;
    for ((row, note), &w) in rows.iter_mut().zip(notes.iter_mut()).zip(&WINDOWS) {
        let opts = PipelineOptions { floor: true, ..PipelineOptions::default() };
        let r = timed(count, seconds, |n| {
            let t = run_pipelined(&uri, FLOOR_SIZE, n, w, opts).map_err(|e| e.to_string())?;
            let per_s = t.exchanges_per_s();
            Ok((t, per_s))
        });
        match r {
            Ok((t, per_s)) => {
                row.floor_exchanges_per_s = Some(per_s);
                row.floor_client_cpu_ns_per_exchange = Some(t.client_cpu_ns_per_exchange());
                row.floor_server_cpu_ns_per_exchange = t.server_cpu_ns_per_exchange();
                if row.floor_server_cpu_ns_per_exchange.is_none() {
                    note.push("the floor's server did not report its CPU time".into());
                }
                count = next_count(per_s, seconds, lab.scale.calls);
            }
            Err(e) => note.push(format!("floor: {e}")),
        }
    }
}

/// lowlat's closed loop at every W into `s.rows`, then the open loop at fractions of the
/// saturated rate into `s.points`. Fails (the series then says why) when there is no server,
/// no single-call median to model with, or an open-loop point fails.
fn calls(lab: &mut Lab, scheme: &str, s: &mut SaturationSeries, notes: &mut [Vec<String>]) -> Result<(), String> {
    let (_srv, uri) = lab.rpc_server(scheme, SPIN)?;
    let seconds = lab.scale.saturation_seconds;
    let mut count = lab.scale.calls;
    for ((row, note), &w) in s.rows.iter_mut().zip(notes.iter_mut()).zip(&WINDOWS) {
        let r = timed(count, seconds, |n| {
            let spec = BenchSpec { in_flight: Some(w), ..lab.spec(&uri, "null", 0, n, SPIN) };
            let sum = bench::run(&spec).map_err(|e| e.to_string())?;
            let per_s = sum.calls_per_s;
            Ok((sum, per_s))
        });
        match r {
            Ok((sum, per_s)) => {
                row.calls_per_s = Some(per_s);
                row.p50_ns = Some(sum.p50_ns as f64);
                row.p99_ns = Some(sum.p99_ns as f64);
                row.server_cpu_ns_per_call = sum.server_cpu_ns_per_call;
                if sum.server_cpu_ns_per_call.is_none() {
                    note.push("the server's CPU per call could not be read from its stats".into());
                }
                if sum.errors > 0 {
                    note.push(format!("{} calls failed", sum.errors));
                }
                count = next_count(per_s, seconds, lab.scale.calls);
            }
            Err(e) => note.push(e),
        }
    }
    // A single call at a time, unloaded: the service time s of the model.
    let service_ns = s
        .rows
        .iter()
        .find(|r| r.in_flight == 1)
        .and_then(|r| r.p50_ns)
        .ok_or("no single-call median (W = 1 failed)")?;
    let (saturated, w) =
        s.saturated().and_then(|r| Some((r.calls_per_s?, r.in_flight))).ok_or("no W measured a rate to saturate")?;
    s.service_ns = Some(service_ns);
    s.saturated_calls_per_s = Some(saturated);
    s.saturated_in_flight = Some(w);
    for u in UTILISATIONS {
        let p = offer(lab, &uri, OPEN_LOOP_SPIN, u, saturated * u, service_ns)
            .map_err(|e| format!("open loop at u = {u} ({:.0} calls/s): {e}", saturated * u))?;
        s.points.push(p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_too_short_for_its_time_is_made_again_long_enough_once() {
        // 1,000 exchanges at 1M/s is 1 ms of a 100 ms aim: again with 100,000.
        let mut asked = Vec::new();
        let r = timed(1_000, 0.1, |n| {
            asked.push(n);
            Ok((n, 1e6))
        });
        assert_eq!(r, Ok((100_000, 1e6)));
        assert_eq!(asked, [1_000, 100_000]);
        // Long enough at once: run once.
        let mut runs = 0;
        let r = timed(80_000, 0.1, |n| {
            runs += 1;
            Ok((n, 1e6))
        });
        assert_eq!((r, runs), (Ok((80_000, 1e6)), 1));
        // A failure is the result, not retried.
        let r: Result<(u64, f64), String> = timed(10, 0.1, |_| Err("no server".into()));
        assert_eq!(r, Err("no server".into()));
    }

    #[test]
    fn the_next_count_fills_the_time_at_twice_the_last_rate_within_bounds() {
        assert_eq!(next_count(1e6, 0.1, 5_000), 200_000);
        assert_eq!(next_count(10.0, 0.1, 5_000), 5_000);
        assert_eq!(next_count(1e12, 1.0, 5_000), MAX_COUNT);
        assert_eq!(next_count(f64::NAN, 1.0, 5_000), 5_000);
    }

    #[test]
    fn shm_and_udp_have_a_floor_and_tcp_says_why_not() {
        assert!(floor_of("shm").is_ok() && floor_of("udp").is_ok());
        assert!(floor_of("tcp").unwrap_err().contains("no throughput floor"));
    }
}
