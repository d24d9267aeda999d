//! `lowlat stat`: a running server's counters, read through its built-in stats program.

use std::time::Duration;

use lowlat::{ClientConfig, Psk};

use crate::key::KeyArgs;

/// A running server's counters, read from the endpoint at URI through its built-in stats
/// program (0x20004C4E, behind the same binding and key as every other program): sessions,
/// binds granted and refused by cause, cookies, calls, procedures executed, duplicates,
/// retransmissions, busy, errors by code, bytes, checksum and MAC failures.
///
/// The figures include the binding and the call that read them.
#[derive(clap::Args)]
pub(crate) struct Args {
    uri: String,
    /// Print one JSON object (with --watch: one a second).
    #[arg(long)]
    json: bool,
    /// Print the counters and calls' times in the Prometheus/OpenMetrics text format, as
    /// `lowlat serve --metrics` serves them.
    #[arg(long, conflicts_with_all = ["json", "watch"])]
    openmetrics: bool,
    /// Print rates every second (per second, but `sessions_open`, which is a level) until
    /// interrupted.
    #[arg(long)]
    watch: bool,
    /// With --watch: stop after this many seconds.
    #[arg(long)]
    count: Option<u64>,
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    #[command(flatten)]
    key: KeyArgs,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { uri, json, openmetrics, watch, count, timeout_ms, key } = args;
    let psk = key.load()?;
    let client = connect(&uri, timeout_ms, psk, key.encrypt)?;
    if openmetrics {
        let text = read_text(&client)?;
        let counters = lowlat::EndpointStats::from_fields(&lowlat::stats::parse_text(&text));
        let times = lowlat::metrics::parse_times(&text);
        print!("{}", lowlat::metrics::openmetrics_text(&[lowlat::metrics::EndpointMetrics { uri, counters, times }]));
        return Ok(());
    }
    stat(&client, &uri, json, watch, count)
}

/// The stats program's answer: counters, then calls' times.
fn read_text(client: &lowlat::Client) -> Result<String, String> {
    lowlat::stats::read(client).map_err(|e| e.to_string())
}

/// Reads the counters of the endpoint `client` is bound to.
fn read_stats(client: &lowlat::Client) -> Result<Vec<(String, u64)>, String> {
    Ok(lowlat::stats::parse_text(&read_text(client)?))
}

/// A client of the stats program at `uri`.
fn connect(uri: &str, timeout_ms: u64, psk: Option<Psk>, encrypt: bool) -> Result<lowlat::Client, String> {
    // Patient retransmission: the answer takes a hop to a worker, and a reading that resends
    // would disturb the counters it reads (lost datagrams are all it must recover).
    let engine = lowlat::ClientEngineConfig {
        initial_rto: Duration::from_millis(500),
        min_rto: Duration::from_millis(100),
        ..lowlat::ClientEngineConfig::default()
    };
    let cfg = ClientConfig {
        deadline: Duration::from_millis(timeout_ms),
        psk,
        encrypt,
        slots: 1,
        engine,
        ..ClientConfig::default()
    };
    lowlat::Client::connect_with(uri, lowlat::stats::PROGRAM, 1, cfg).map_err(|e| e.to_string())
}

/// The counters once, or (watching) their rates every second.
fn stat(client: &lowlat::Client, uri: &str, json: bool, watch: bool, count: Option<u64>) -> Result<(), String> {
    let first = read_stats(client)?;
    if !watch {
        if json {
            let mut o = serde_json::Map::new();
            o.insert("uri".into(), uri.into());
            for (k, v) in first {
                o.insert(k, v.into());
            }
            println!("{}", serde_json::Value::Object(o));
        } else {
            let width = first.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (k, v) in first {
                println!("{k:width$}  {v}");
            }
        }
        return Ok(());
    }
    lowlat_sys::block_server_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
    // The counters a person watches, as rates (and the one level among them).
    const SHOWN: [&str; 10] = [
        "sessions_open",
        "binds_granted",
        "binds_refused",
        "calls",
        "executed",
        "duplicates",
        "retransmits_received",
        "busy",
        "mac_failures",
        "bytes_in",
    ];
    let mut before = (std::time::Instant::now(), first);
    if !json {
        println!("{}", SHOWN.iter().map(|k| format!("{:>14}", k.trim_end_matches("_received"))).collect::<String>());
    }
    for _ in 0..count.unwrap_or(u64::MAX) {
        if lowlat_sys::wait_termination(Duration::from_secs(1)).is_some() {
            break;
        }
        let now = (std::time::Instant::now(), read_stats(client)?);
        let secs = (now.0 - before.0).as_secs_f64().max(1e-9);
        let old = |k: &str| before.1.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
        let rate =
            |k: &str, v: u64| if k == "sessions_open" { v as f64 } else { v.saturating_sub(old(k)) as f64 / secs };
        if json {
            let mut o = serde_json::Map::new();
            o.insert("uri".into(), uri.into());
            o.insert("interval_s".into(), secs.into());
            for (k, v) in &now.1 {
                o.insert(k.clone(), rate(k, *v).into());
            }
            println!("{}", serde_json::Value::Object(o));
        } else {
            let value = |k: &str| now.1.iter().find(|(n, _)| n == k).map_or(0.0, |(_, v)| rate(k, *v));
            println!("{}", SHOWN.iter().map(|k| format!("{:>14.0}", value(k))).collect::<String>());
        }
        before = now;
    }
    Ok(())
}
