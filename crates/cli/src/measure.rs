//! What the measuring subcommands (bench, pingpong, workload) share: the calling thread's CPU and
//! the summary line (or JSON) they print.

use lowlat_lab::latency;

pub(crate) fn pin(cpu: Option<usize>) -> Result<(), String> {
    if let Some(c) = cpu {
        lowlat_sys::pin_to_cpu(c).map_err(|e| format!("cannot pin to CPU {c}: {e}"))?;
    }
    Ok(())
}

pub(crate) fn print_summary(s: &latency::Summary, json: bool) {
    if json {
        println!("{}", s.to_json());
    } else {
        println!(
            "{} {} {} size={} threads={} spin={}: p50 {} µs, p90 {} µs, p99 {} µs, p99.9 {} µs, max {} µs, mean {} µs; {:.0} calls/s, {:.1} Mbit/s{}",
            s.kind,
            s.transport,
            s.proc,
            s.size,
            s.threads,
            s.spin,
            latency::us(s.p50_ns),
            latency::us(s.p90_ns),
            latency::us(s.p99_ns),
            latency::us(s.p999_ns),
            latency::us(s.max_ns),
            latency::us(s.mean_ns),
            s.calls_per_s,
            s.mbit_s,
            match (s.errors, s.server_cpu_ns_per_call) {
                (0, None) => String::new(),
                (0, Some(cpu)) => format!("; server CPU {cpu:.0} ns/call"),
                (e, None) => format!(", {e} errors"),
                (e, Some(cpu)) => format!(", {e} errors; server CPU {cpu:.0} ns/call"),
            }
        );
    }
}
