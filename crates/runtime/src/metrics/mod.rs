//! lowlat's counters where operators look: the Prometheus/OpenMetrics text format.
//!
//! A server serves them itself over HTTP ([`ServerBuilder::metrics`](crate::ServerBuilder::metrics),
//! `lowlat serve --metrics ADDR`: `GET /metrics` on a thread of its own, which asks each
//! serving thread for a copy of its counters as [`Server::stats`](crate::Server::stats) does,
//! so nothing is added to the call path but the counters that exist already); `lowlat stat URI
//! --openmetrics` prints the same text for a server without it ([`openmetrics_text`]). A
//! client's counters join a program's own registry with [`register_client`].
//!
//! Every counter `lowlat stat` shows is a metric named after it, `lowlat_<counter>_total`
//! (`lowlat_sessions_open` is a gauge; `serving_cpu_ns` is `lowlat_serving_cpu_seconds_total`), labelled with the `endpoint` (its URI) and the
//! `transport` (the URI's scheme). Served calls' durations, measured on the server from the
//! moment the serving thread takes a call to the moment its answer goes out, are the histogram
//! `lowlat_call_duration_seconds`, labelled also with the `program` (hex), `version` and
//! `procedure` (its name): a sample, one call in 64 timed, so its `_count` is the number of
//! calls timed (`lowlat_calls_total` counts them all); a quantile read from its buckets (eight
//! to an octave, 128 ns to 17 s) is within 6% of the sampled calls' own.

mod http;

use std::fmt::Write;
use std::sync::Arc;

pub use prometheus_client;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

pub(crate) use self::http::{MetricsServer, Sources};
pub use crate::serving::routes::ProcedureName;
pub use crate::serving::timing::{bucket_bound_ns, bucket_of, ProcedureTimes, BUCKETS};
use crate::stats::EndpointStats;
use crate::Client;

/// What one server endpoint exposes.
#[derive(Clone, Debug, Default)]
pub struct EndpointMetrics {
    /// The endpoint's URI.
    pub uri: String,
    /// Its counters.
    pub counters: EndpointStats,
    /// Its calls' sampled durations, by procedure (procedures with no call timed left out).
    pub times: Vec<(ProcedureName, ProcedureTimes)>,
}

/// The OpenMetrics text of `endpoints` (what `GET /metrics` answers), ending in `# EOF`.
pub fn openmetrics_text(endpoints: &[EndpointMetrics]) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Endpoints(endpoints.to_vec())));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String cannot fail");
    out
}

/// `openmetrics` (as [`openmetrics_text`] makes it) in the older Prometheus text format 0.0.4,
/// for scrapers and tools that ask for it (`promtool check metrics`, a plain `curl`): a
/// counter's family is named with its `_total`, and there is no `# UNIT` or `# EOF` line.
pub fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{tag}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Adds `client`'s counters ([`Client::stats`]) to `registry`: `lowlat_client_<counter>_total`
/// labelled with the `endpoint`, read at each scrape (which waits for each slot's call in
/// progress to end, as `stats` does).
pub fn register_client(registry: &mut Registry, client: Arc<Client>) {
    registry.register_collector(Box::new(ClientCollector(client)));
}

/// The scheme of a URI, as the `transport` label gives it.
fn transport_of(uri: &str) -> &str {
    uri.split_once("://").map_or("", |(scheme, _)| scheme)
}

#[derive(Debug)]
struct Endpoints(Vec<EndpointMetrics>);

impl Collector for Endpoints {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(first) = self.0.first() else { return Ok(()) };
        for (i, (name, _)) in first.counters.fields().into_iter().enumerate() {
            let gauge = name == "sessions_open";
            let kind = if gauge { MetricType::Gauge } else { MetricType::Counter };
            let help = EndpointStats::help(name);
            // A time kept in nanoseconds goes out in seconds, the unit Prometheus names.
            let nanos = name.strip_suffix("_ns");
            let metric_name = format!("lowlat_{}", nanos.unwrap_or(name));
            let unit = nanos.map(|_| &Unit::Seconds);
            let mut metric = encoder.encode_descriptor(&metric_name, help, unit, kind)?;
            for e in &self.0 {
                let labels = [("endpoint", e.uri.as_str()), ("transport", transport_of(&e.uri))];
                let value = e.counters.fields()[i].1;
                let mut family = metric.encode_family(&labels)?;
                if gauge {
                    family.encode_gauge(&(value as i64))?;
                } else if nanos.is_some() {
                    family.encode_counter::<NoLabelSet, f64, u64>(&(value as f64 / 1e9), None)?;
                } else {
                    family.encode_counter::<NoLabelSet, _, u64>(&value, None)?;
                }
            }
        }
        let help = "Served calls' durations on the server, from the serving thread taking the call to its answer going out; one call in 64 timed";
        let mut metric =
            encoder.encode_descriptor("lowlat_call_duration", help, Some(&Unit::Seconds), MetricType::Histogram)?;
        let mut buckets: Vec<(f64, u64)> = Vec::with_capacity(BUCKETS + 1);
        for e in &self.0 {
            for (p, t) in &e.times {
                let program = format!("{:#x}", p.program);
                let version = p.version.to_string();
                let labels = [
                    ("endpoint", e.uri.as_str()),
                    ("transport", transport_of(&e.uri)),
                    ("program", program.as_str()),
                    ("version", version.as_str()),
                    ("procedure", p.name.as_str()),
                ];
                buckets.clear();
                for (b, &n) in t.buckets.iter().enumerate() {
                    let bound = bucket_bound_ns(b).map_or(f64::MAX, |ns| ns as f64 / 1e9);
                    buckets.push((bound, n));
                }
                metric.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                    t.sum_ns as f64 / 1e9,
                    t.count,
                    &buckets,
                    None,
                )?;
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct ClientCollector(Arc<Client>);

impl Collector for ClientCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let uri = self.0.uri();
        let stats = self.0.stats();
        for (name, value) in stats.fields() {
            let metric_name = format!("lowlat_client_{name}");
            let help = crate::stats::ClientStats::help(name);
            let mut metric = encoder.encode_descriptor(&metric_name, help, None, MetricType::Counter)?;
            let labels = [("endpoint", uri), ("transport", transport_of(uri))];
            metric.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&value, None)?;
        }
        Ok(())
    }
}

/// The times of the procedures named in `procedures` (id, name) that had calls timed.
pub(crate) fn named_times(
    procedures: &[(usize, ProcedureName)],
    times: &[ProcedureTimes],
) -> Vec<(ProcedureName, ProcedureTimes)> {
    procedures
        .iter()
        .filter_map(|(id, name)| {
            let t = times.get(*id).filter(|t| t.count > 0)?;
            Some((name.clone(), t.clone()))
        })
        .collect()
}

/// The calls' times as the stats program sends them after the counters, one procedure a line:
/// `call_times PROGRAM VERSION NUMBER NAME XDR COUNT SUM_NS B0,B1,...` (a line the counters'
/// reader skips, so older clients read the counters as before).
pub(crate) fn times_to_text(times: &[(ProcedureName, ProcedureTimes)], out: &mut String) {
    for (p, t) in times {
        let _ = write!(
            out,
            "call_times {:#x} {} {} {} {} {} {} ",
            p.program,
            p.version,
            p.number,
            // A name is one field of the line (names from `.x` files have no spaces).
            p.name.replace(char::is_whitespace, "_"),
            u8::from(p.xdr),
            t.count,
            t.sum_ns
        );
        for (i, b) in t.buckets.iter().enumerate() {
            let _ = write!(out, "{}{b}", if i == 0 { "" } else { "," });
        }
        out.push('\n');
    }
}

/// Reads the `call_times` lines of the stats program's answer (written by the stats program after the counters); other lines
/// and malformed ones are skipped.
pub fn parse_times(text: &str) -> Vec<(ProcedureName, ProcedureTimes)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("call_times ")?.split(' ');
            let program = u32::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
            let version = f.next()?.parse().ok()?;
            let number = f.next()?.parse().ok()?;
            let name = f.next()?.to_string();
            let xdr = f.next()? == "1";
            let count = f.next()?.parse().ok()?;
            let sum_ns = f.next()?.parse().ok()?;
            let buckets: Vec<u64> = f.next()?.split(',').map(|b| b.parse().ok()).collect::<Option<_>>()?;
            let times = ProcedureTimes { count, sum_ns, buckets };
            (times.buckets.len() == BUCKETS + 1)
                .then_some((ProcedureName { program, version, number, name, xdr }, times))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EndpointMetrics {
        let mut t = ProcedureTimes { count: 3, sum_ns: 600_000, ..ProcedureTimes::default() };
        t.buckets[bucket_of(200_000)] = 3;
        EndpointMetrics {
            uri: "udp://127.0.0.1:7000".into(),
            counters: EndpointStats {
                calls: 192,
                sessions_open: 2,
                serving_cpu_ns: 1_500_000_000,
                ..EndpointStats::default()
            },
            times: vec![(
                ProcedureName { program: 0x2000_4c4c, version: 1, number: 6, name: "SPIN".into(), xdr: false },
                t,
            )],
        }
    }

    #[test]
    fn counters_and_times_are_named_as_prometheus_expects() {
        let text = openmetrics_text(&[sample()]);
        assert!(text.contains("# TYPE lowlat_calls counter\n"), "{text}");
        assert!(
            text.contains("lowlat_calls_total{endpoint=\"udp://127.0.0.1:7000\",transport=\"udp\"} 192\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE lowlat_sessions_open gauge\n"), "{text}");
        assert!(
            text.contains("lowlat_sessions_open{endpoint=\"udp://127.0.0.1:7000\",transport=\"udp\"} 2\n"),
            "{text}"
        );
        // A time in nanoseconds goes out in seconds.
        assert!(text.contains("# TYPE lowlat_serving_cpu_seconds counter\n"), "{text}");
        assert!(text.contains("# UNIT lowlat_serving_cpu_seconds seconds\n"), "{text}");
        assert!(
            text.contains(
                "lowlat_serving_cpu_seconds_total{endpoint=\"udp://127.0.0.1:7000\",transport=\"udp\"} 1.5\n"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE lowlat_call_duration_seconds histogram\n"), "{text}");
        assert!(text.contains("procedure=\"SPIN\""), "{text}");
        assert!(text.contains("lowlat_call_duration_seconds_count{endpoint=\"udp://127.0.0.1:7000\",transport=\"udp\",program=\"0x20004c4c\",version=\"1\",procedure=\"SPIN\"} 3\n"), "{text}");
        assert!(text.contains("_bucket{le=\"+Inf\",endpoint=\"udp://127.0.0.1:7000\""), "{text}");
        assert!(text.contains("procedure=\"SPIN\"} 3\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_older_text_format_names_counters_with_their_total() {
        let text = prometheus_text(&openmetrics_text(&[sample()]));
        assert!(text.contains("# TYPE lowlat_calls_total counter\n"), "{text}");
        assert!(text.contains("# HELP lowlat_calls_total New calls received.\n"), "{text}");
        assert!(text.contains("# TYPE lowlat_sessions_open gauge\n"), "{text}");
        assert!(text.contains("# TYPE lowlat_call_duration_seconds histogram\n"), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    }

    #[test]
    fn times_travel_as_text() {
        let e = sample();
        let mut text = e.counters.to_text();
        times_to_text(&e.times, &mut text);
        text.push_str("call_times garbage\n");
        assert_eq!(parse_times(&text), e.times);
        // The counters' reader skips the times.
        assert_eq!(crate::stats::parse_text(&text).len(), e.counters.fields().len());
    }
}
