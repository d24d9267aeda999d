//! Latency summaries: what one benchmark run reports, as a table row or one JSON line.

use hdrhistogram::Histogram;
use serde::Serialize;

/// A new histogram for round trips up to 100 s at 3 significant digits, to the nanosecond below
/// 2 µs. (A lowest discernible value of 10 ns made buckets 8 ns wide up to 16 µs: a shared-memory
/// round trip of ~110 ns was read to within 7%, too coarse for a ratio to the floor.)
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds are valid")
}

/// The median of `v` (the upper one of an even count; 0 for none), sorting `v`.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// One benchmark's result, in the JSON shape DESIGN.md fixes (one object per line).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    /// "rpc" (through lowlat's RPC layer) or "raw" (the transport alone, or the machine's floor).
    pub kind: String,
    /// Transport scheme of the URI (udp, tcp, unix, shm, eth, xdp, ...).
    pub transport: String,
    /// Lab procedure called (null, minus, maxarg, maxresult, echo, count, spin).
    pub proc: String,
    /// Payload bytes per call (argument or result, whichever the procedure carries).
    pub size: usize,
    /// Calls measured (recorded in the histogram), over all threads.
    pub calls: u64,
    /// Calling (or, open loop, sending) threads.
    pub threads: usize,
    /// Spin policy on the client ("0" = always block, "forever" = busy-poll, "adaptive").
    pub spin: String,
    /// Median round trip, ns.
    pub p50_ns: u64,
    /// 90th percentile round trip, ns.
    pub p90_ns: u64,
    /// 99th percentile round trip, ns.
    pub p99_ns: u64,
    /// 99.9th percentile round trip, ns.
    pub p999_ns: u64,
    /// Slowest round trip, ns.
    pub max_ns: u64,
    /// Mean round trip over all calls, ns.
    pub mean_ns: u64,
    /// Mean of the fastest 99% of calls: a mean that preemption by other processes cannot swamp.
    pub mean99_ns: u64,
    /// Completed calls per second of wall time, over all threads.
    pub calls_per_s: f64,
    /// Payload megabits per second (arguments plus results).
    pub mbit_s: f64,
    /// Calls that failed (a run with failures is not a clean figure).
    pub errors: u64,
    /// Why the first of them failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// The server's CPU per call over the run, ns: its serving thread's clock (read through
    /// the stats program, lowlat's protocol only) over the calls it served meanwhile. At
    /// saturation, the server's cost per call; below it, its idle spinning counts too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_ns_per_call: Option<f64>,
}

impl Summary {
    /// Builds a summary from round trips recorded in `h` (ns). `size` is the reported payload
    /// size (bytes); `payload_bytes_per_call` (arguments plus results, bytes) and `wall_s` (the
    /// measured interval, seconds) give the rates, which are 0 when `wall_s` is not positive.
    #[allow(clippy::too_many_arguments)]
    pub fn from_histogram(
        kind: &str,
        transport: &str,
        proc: &str,
        size: usize,
        payload_bytes_per_call: usize,
        threads: usize,
        spin: &str,
        h: &Histogram<u64>,
        wall_s: f64,
        errors: u64,
    ) -> Summary {
        let calls = h.len();
        let per_s = if wall_s > 0.0 { calls as f64 / wall_s } else { 0.0 };
        Summary {
            kind: kind.into(),
            transport: transport.into(),
            proc: proc.into(),
            size,
            calls,
            threads,
            spin: spin.into(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            mean_ns: h.mean() as u64,
            mean99_ns: trimmed_mean(h, 0.99) as u64,
            calls_per_s: per_s,
            mbit_s: per_s * payload_bytes_per_call as f64 * 8.0 / 1e6,
            server_cpu_ns_per_call: None,
            errors,
            first_error: None,
        }
    }

    /// The summary as one line of JSON (no trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }
}

/// The mean of the recorded values at or below the `q` quantile.
pub fn trimmed_mean(h: &Histogram<u64>, q: f64) -> f64 {
    let cut = h.value_at_quantile(q);
    let (mut sum, mut n) = (0f64, 0u64);
    for v in h.iter_recorded() {
        let value = h.highest_equivalent(v.value_iterated_to());
        if value > cut {
            break;
        }
        sum += value as f64 * v.count_at_value() as f64;
        n += v.count_at_value();
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Microseconds with two decimals, for tables.
pub fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}
