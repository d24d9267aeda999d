//! The text tables `lowlat lab` prints when it is done: one per experiment, the same figures as
//! `report.html` in a terminal's width.

use lowlat_report::{LoadPoint, Results};

use crate::account;
use crate::latency::us;

/// Prints every table, in the order the experiments ran.
pub(crate) fn print(r: &Results, sends: &[(f64, f64)]) {
    hosts(r);
    ladder(r);
    busy_server(r);
    threads(r);
    load(r);
    saturation(r);
    cold(r);
    peers(r);
    accounting(r, sends);
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| us(x as u64))
}

/// The two machines of a run across hosts, and the link's floor.
fn hosts(r: &Results) {
    let Some(remote) = &r.remote else { return };
    let m = &remote.machine;
    println!(
        "\n== Two hosts: callers here, servers on {} (agent {}) ==",
        m.hostname.as_deref().unwrap_or("?"),
        remote.agent
    );
    println!("here:  {}, {} cores, kernel {}", r.machine.cpu_model, r.machine.cores, r.machine.kernel);
    if let Some(n) = &r.machine.nic {
        println!("       {}", n.describe());
    }
    println!("there: {}, {} cores, kernel {}", m.cpu_model, m.cores, m.kernel);
    if let Some(n) = &m.nic {
        println!("       {}", n.describe());
    }
    println!(
        "the link's floor (udp, two connected sockets, 32 B): p50 {} µs, p99 {} µs",
        opt_us(remote.link_floor.map(|l| l.p50_ns)),
        opt_us(remote.link_floor.map(|l| l.p99_ns))
    );
    for l in &remote.local_only {
        println!("stays here: {l}");
    }
}

fn ladder(r: &Results) {
    println!(
        "\n== The ladder: the machine's floor, lowlat's raw ping-pong and its null call (32 B) / echo (1 KiB), µs =="
    );
    println!("(floor: the simplest exchange the machine allows where lowlat's transport needs more: shm, one");
    println!(" message each way through cache lines, no ring; udp, two connected sockets. raw: lowlat's transport)");
    println!(
        "{:<12} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>7} {:>7} {:>9}",
        "transport",
        "bytes",
        "floor p50",
        "floor p99",
        "raw p50",
        "raw p99",
        "rpc p50",
        "rpc p99",
        "rpc/raw",
        "rpc/flr",
        "diff"
    );
    if r.ladder.iter().any(|row| row.across_link) {
        println!("(<>: measured across the link, the server on the other host; the rest on this machine)");
    }
    let times = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}x"));
    for row in &r.ladder {
        println!(
            "{:<12} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>7} {:>7} {:>9}{}",
            // Measured across the link to the other host.
            if row.across_link { format!("{} <>", row.transport) } else { row.transport.clone() },
            row.size,
            opt_us(row.floor.map(|l| l.p50_ns)),
            opt_us(row.floor.map(|l| l.p99_ns)),
            opt_us(row.raw.map(|l| l.p50_ns)),
            opt_us(row.raw.map(|l| l.p99_ns)),
            opt_us(row.rpc.map(|l| l.p50_ns)),
            opt_us(row.rpc.map(|l| l.p99_ns)),
            times(row.ratio_p50),
            times(row.rpc_over_floor_p50),
            row.diff_p50_ns.map_or("-".into(), |d| format!("{:+.2}", d / 1000.0)),
            row.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
        );
    }
}

fn busy_server(r: &Results) {
    println!("\n== A busy server: {} on the server's CPU ==", r.busy_server.workload);
    for b in &r.busy_server.rows {
        println!(
            "{:<6} raw p50 {:>8} µs  rpc p50 {:>8} p99 {:>8} µs  {:>9} calls/s  workload slowdown {}{}",
            b.transport,
            opt_us(b.raw.map(|l| l.p50_ns)),
            opt_us(b.rpc.map(|l| l.p50_ns)),
            opt_us(b.rpc.map(|l| l.p99_ns)),
            b.round_trips_per_s.map_or("-".into(), |x| format!("{x:.0}")),
            b.workload_slowdown.map_or("-".into(), |x| format!("{x:.2}x")),
            b.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
        );
    }
}

fn threads(r: &Results) {
    let rounds = r.threads.iter().map(|t| t.rounds).max().unwrap_or(1);
    println!(
        "\n== Threads (Firefly Table I): calls/s and Mbit/s, and the rate against one caller's (medians of {rounds} \
         alternating rounds) =="
    );
    for t in &r.threads {
        let ratio = t.of_one_caller(&r.threads);
        println!(
            "{:<7} {:<10} {:>5} B {:>2} threads{}: {:>10} calls/s {:>9} Mbit/s {:>6}{}",
            t.transport,
            t.proc,
            t.size,
            t.threads,
            if t.unpinned { " unpinned" } else { " pinned  " },
            t.calls_per_s.map_or("-".into(), |x| format!("{x:.0}")),
            t.mbit_per_s.map_or("-".into(), |x| format!("{x:.1}")),
            ratio.map_or("-".into(), |x| format!("{x:.2}x")),
            t.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
        );
    }
}

fn load(r: &Results) {
    println!(
        "\n== Load (open loop, Poisson arrivals, latency from each call's scheduled time): latency vs offered \
         load, with r = s/(1-u); * = the generator fell behind its schedule (over 1% of sends late by over \
         10 µs; the machine's floor: the same schedule kept by a thread that makes no call) ==",
    );
    for l in &r.load {
        println!(
            "{} (capacity {} calls/s):",
            l.transport,
            l.capacity_calls_per_s.map_or("-".into(), |x| format!("{x:.0}"))
        );
        for p in &l.points {
            println!(
                "  u={:.2}  p50 {:>8} p99 {:>8} p99.9 {:>8} µs   model {:>8} µs   lag max {} µs, {}{}",
                p.offered_fraction,
                us(p.p50_ns as u64),
                us(p.p99_ns as u64),
                us(p.p999_ns as u64),
                us(p.model_ns as u64),
                max_lag(p),
                late(p),
                if p.sustained == Some(false) { "  *" } else { "" }
            );
        }
    }
}

/// A load point's latest send, beside the machine's floor for its schedule when measured.
fn max_lag(p: &LoadPoint) -> String {
    let lag = p.max_lag_ns.map_or("-".into(), |x| us(x as u64));
    match p.floor_max_lag_ns {
        Some(f) => format!("{lag:>8} (machine {})", us(f as u64)),
        None => format!("{lag:>8}"),
    }
}

/// A load point's late sends, beside the machine's floor for its schedule when measured.
fn late(p: &LoadPoint) -> String {
    let late = 100.0 * p.late_fraction.unwrap_or(0.0);
    match p.floor_late_fraction {
        Some(f) => format!("{late:.1}% late (machine {:.1}%)", 100.0 * f),
        None => format!("{late:.1}% late"),
    }
}

fn saturation(r: &Results) {
    println!(
        "\n== Saturation: null calls/s with W in flight from one caller thread against the machine's throughput \
         floor at the same W (both sides polling); CPU ns per call (server) and per exchange (floor) =="
    );
    let num = |v: Option<f64>| v.map_or_else(|| "-".into(), |x| format!("{x:.0}"));
    for s in &r.saturation {
        match (&s.floor, &s.no_floor) {
            (Some(f), _) => println!("{}: floor {f}, {} B messages", s.transport, s.floor_size),
            (None, Some(why)) => println!("{}: {why}", s.transport),
            (None, None) => println!("{}:", s.transport),
        }
        println!(
            "  {:>3} | {:>11} {:>9} {:>9} {:>10} | {:>11} {:>9} {:>9} | {:>8}",
            "W", "calls/s", "p50 µs", "p99 µs", "server ns", "floor exch/s", "srv ns", "cli ns", "/floor"
        );
        for row in &s.rows {
            println!(
                "  {:>3} | {:>11} {:>9} {:>9} {:>10} | {:>11} {:>9} {:>9} | {:>8}{}",
                row.in_flight,
                num(row.calls_per_s),
                opt_us(row.p50_ns),
                opt_us(row.p99_ns),
                num(row.server_cpu_ns_per_call),
                num(row.floor_exchanges_per_s),
                num(row.floor_server_cpu_ns_per_exchange),
                num(row.floor_client_cpu_ns_per_exchange),
                row.over_floor.map_or("-".into(), |x| format!("{x:.2}x")),
                row.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
            );
        }
        if !s.points.is_empty() {
            println!(
                "  open loop against the saturated rate {} calls/s (W = {}); s = {} µs (one call at a time, p50):",
                num(s.saturated_calls_per_s),
                s.saturated_in_flight.map_or("-".into(), |w| w.to_string()),
                opt_us(s.service_ns)
            );
        }
        for p in &s.points {
            println!(
                "  u={:.2}  {:>9.0} calls/s  p50 {:>8} p99 {:>8} µs   r = s/(1-u) {:>8} µs   lag max {} µs, {}{}",
                p.offered_fraction,
                p.offered_calls_per_s,
                us(p.p50_ns as u64),
                us(p.p99_ns as u64),
                us(p.model_ns as u64),
                max_lag(p),
                late(p),
                if p.sustained == Some(false) { "  *" } else { "" }
            );
        }
        if let Some(why) = &s.skipped {
            println!("  skipped: {why}");
        }
        println!("  ({} measured in {:.1} s)", s.transport, s.seconds);
    }
}

fn cold(r: &Results) {
    println!("\n== Cold calls: the first call after idleness (median), µs ==");
    for c in &r.cold {
        println!(
            "{:<5} idle {:>3} ms: first {:>9}  warm p50 {:>8}{}",
            c.transport,
            c.idle_ms,
            opt_us(c.first_call_ns),
            opt_us(c.warm_p50_ns),
            c.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})"))
        );
    }
}

fn peers(r: &Results) {
    println!("\n== Peers: null call and 1440-byte echo, µs ==");
    for p in &r.peers {
        println!(
            "{:<8} {:<8} {:<5} {:>5} B  p50 {:>9}  p99 {:>9}{}",
            p.system,
            p.transport,
            p.proc,
            p.size,
            opt_us(p.p50_ns),
            opt_us(p.p99_ns),
            p.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})"))
        );
    }
}

fn accounting(r: &Results, sends: &[(f64, f64)]) {
    println!();
    for (a, (c, s)) in r.accounting.iter().zip(sends.iter().chain(std::iter::repeat(&(0.0, 0.0)))) {
        match &a.skipped {
            Some(why) => println!("accounting {}: skipped: {why}", a.transport),
            None => println!("{}", account::table(a, *c, *s)),
        }
    }
}
