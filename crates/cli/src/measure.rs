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
        println!("{}", summary_line(s));
    }
}

/// The summary as people read it: one line.
fn summary_line(s: &latency::Summary) -> String {
    format!(
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
            (e, None) => format!(", {e} errors{}", first_error(s)),
            (e, Some(cpu)) => format!(", {e} errors{}; server CPU {cpu:.0} ns/call", first_error(s)),
        }
    )
}

/// The first failure of a run, for its summary line.
fn first_error(s: &latency::Summary) -> String {
    s.first_error.as_deref().map(|e| format!(" (the first: {e})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_with_failures_says_why_the_first_failed() {
        let h = latency::new_histogram();
        let mut s = latency::Summary::from_histogram("rpc", "shm", "null", 0, 0, 1, "forever", &h, 1.0, 0);
        assert!(!summary_line(&s).contains("error"), "{}", summary_line(&s));
        s.errors = 2;
        s.first_error = Some("shm:///x: NULL: connection lost".into());
        let line = summary_line(&s);
        assert!(line.ends_with(", 2 errors (the first: shm:///x: NULL: connection lost)"), "{line}");
        assert!(s.to_json().contains(r#""first_error":"shm:///x: NULL: connection lost""#), "{}", s.to_json());
    }
}
