//! `lowlat lab --quick --out DIR` on this machine: results.json validates against the documented
//! schema (docs/results.schema.json), report.html has every section and renders in headless
//! Chromium to a page that is not blank, and the histogram logs are written.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lowlat_report::browser::{drawn_pixels, find_chromium, screenshot};

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");

#[test]
fn quick_lab_writes_valid_results_and_a_report_that_renders() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(EXE)
        .args(["lab", "--quick", "--out"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lowlat lab --quick took more than 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(status.success(), "lab failed: {out}");
    assert!(started.elapsed() < Duration::from_secs(180), "--quick must stay near 2 minutes: {:?}", started.elapsed());
    for heading in [
        "The ladder",
        "A busy server",
        "Threads",
        "Load",
        "Saturation",
        "Cold calls",
        "Peers",
        "Where the time of a null call",
    ] {
        assert!(out.contains(heading), "terminal output lacks {heading:?}:\n{out}");
    }

    let text = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    lowlat_report::schema::validate(&value).unwrap_or_else(|e| panic!("results.json breaks the schema: {e}"));
    let results = lowlat_report::Results::from_json(&text).unwrap();
    assert!(results.quick);
    for t in ["udp", "tcp", "shm-spin", "shm-block", "unix", "onc+udp", "onc+tcp"] {
        let row =
            results.ladder.iter().find(|r| r.transport == t && r.size == 32).unwrap_or_else(|| panic!("no {t} rung"));
        let raw = row.raw.unwrap_or_else(|| panic!("{t}: no raw figure: {:?}", row.skipped));
        assert!(raw.p50_ns > 0.0 && raw.p50_ns <= raw.p99_ns, "{t}: {raw:?}");
    }
    assert_eq!(results.accounting.len(), 3);
    for a in &results.accounting {
        assert!(a.skipped.is_none(), "{}: {:?}", a.transport, a.skipped);
        assert!(a.parts.iter().all(|p| p.ns > 0.0), "{}: {:?}", a.transport, a.parts);
    }
    assert!(!results.load.is_empty() && !results.cold.is_empty());
    // Firefly's Table I: 1 to 16 callers, pinned and not, over lowlat's transports and ONC RPC.
    for t in ["udp", "tcp", "shm", "onc+udp"] {
        for unpinned in [false, true] {
            let counts: Vec<u32> = results
                .threads
                .iter()
                .filter(|r| r.transport == t && r.proc == "null" && r.unpinned == unpinned)
                .inspect(|r| assert!(r.calls_per_s.is_some_and(|c| c > 0.0), "{t}: {r:?}"))
                .map(|r| r.threads)
                .collect();
            assert_eq!(counts, [1, 2, 4, 8, 16], "{t}, unpinned {unpinned}");
        }
    }
    assert!(results.peers.iter().any(|p| p.system == "lowlat" && p.p50_ns.is_some()));
    saturation_is_complete(&results);

    let logs = std::fs::read_dir(dir.path().join("histograms")).unwrap().count();
    assert!(logs >= 10, "only {logs} histogram logs");

    let html_path = dir.path().join("report.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    for id in ["ladder", "busy", "threads", "load", "saturation", "cold", "peers", "accounting"] {
        assert!(html.contains(&format!("<section id=\"{id}\"")), "report lacks section {id}");
    }
    assert!(html.contains("<svg"), "report has no plots");
    let Some(browser) = find_chromium() else {
        assert!(std::env::var("LOWLAT_REQUIRE_CHROMIUM").map_or(true, |v| v != "1"), "chromium required but missing");
        eprintln!("SKIPPED the screenshot: chromium not installed (scripts/deps/chromium.sh)");
        return;
    };
    let png = dir.path().join("report.png");
    screenshot(browser, &html_path, &png, &dir.path().join("profile"), (1280, 4000), Duration::from_secs(90)).unwrap();
    let d = drawn_pixels(&png, 4).unwrap();
    assert!(d.total() * 100 > 1280 * 4000, "the page looks blank: {d:?}");
    assert!(d.per_band.iter().all(|b| *b > 1000), "part of the page is empty: {d:?}");
}

/// The saturation section: shm, udp and tcp, each with every W measured (calls/s, the server's
/// CPU per call, the floor and the ratio to it where the path has a floor), and open-loop points
/// at increasing u with r = s/(1-u) computed from the single call's median.
fn saturation_is_complete(results: &lowlat_report::Results) {
    let names: Vec<&str> = results.saturation.iter().map(|s| s.transport.as_str()).collect();
    assert_eq!(names, ["shm", "udp", "tcp"], "saturation series");
    // The section stays a small part of --quick (14 s on a 2-vCPU VM shared with two builds).
    let seconds: f64 = results.saturation.iter().map(|s| s.seconds).sum();
    assert!(seconds > 0.0 && seconds < 60.0, "the saturation section took {seconds:.1} s");
    let finite = |v: Option<f64>| v.is_some_and(|x| x.is_finite() && x > 0.0);
    for s in &results.saturation {
        let t = &s.transport;
        assert!(s.skipped.is_none(), "{t}: {:?}", s.skipped);
        let ws: Vec<u32> = s.rows.iter().map(|r| r.in_flight).collect();
        assert_eq!(ws, [1, 4, 16, 64], "{t}: W");
        let has_floor = t != "tcp";
        assert_eq!(s.floor.is_some(), has_floor, "{t}: floor {:?}", s.floor);
        assert_eq!(s.no_floor.is_some(), !has_floor, "{t}: no floor {:?}", s.no_floor);
        for r in &s.rows {
            let w = r.in_flight;
            assert!(r.skipped.is_none(), "{t} W = {w}: {:?}", r.skipped);
            assert!(finite(r.calls_per_s), "{t} W = {w}: calls/s {:?}", r.calls_per_s);
            assert!(finite(r.p50_ns) && r.p50_ns <= r.p99_ns, "{t} W = {w}: {:?} {:?}", r.p50_ns, r.p99_ns);
            assert!(finite(r.server_cpu_ns_per_call), "{t} W = {w}: server CPU {:?}", r.server_cpu_ns_per_call);
            if has_floor {
                assert!(finite(r.floor_exchanges_per_s), "{t} W = {w}: floor {:?}", r.floor_exchanges_per_s);
                assert!(finite(r.floor_server_cpu_ns_per_exchange) && finite(r.floor_client_cpu_ns_per_exchange));
                let ratio = r.calls_per_s.unwrap() / r.floor_exchanges_per_s.unwrap();
                assert_eq!(r.over_floor, Some(ratio), "{t} W = {w}: the ratio is calls/s over the floor's");
            } else {
                assert!(r.floor_exchanges_per_s.is_none() && r.over_floor.is_none(), "{t} W = {w}: a floor");
            }
        }
        let single = s.rows[0].p50_ns;
        assert_eq!(s.service_ns, single, "{t}: s is the single call's median");
        let best = s.rows.iter().filter_map(|r| r.calls_per_s).fold(0.0, f64::max);
        assert_eq!(s.saturated_calls_per_s, Some(best), "{t}: the saturated rate is the best W's");
        assert!(s.points.len() >= 5, "{t}: {} open-loop points", s.points.len());
        let service = s.service_ns.unwrap();
        for (i, p) in s.points.iter().enumerate() {
            assert!(p.offered_fraction > 0.0 && p.offered_fraction < 1.0, "{t}: u = {}", p.offered_fraction);
            if i > 0 {
                assert!(p.offered_fraction > s.points[i - 1].offered_fraction, "{t}: u does not increase");
            }
            assert!((p.offered_calls_per_s - p.offered_fraction * best).abs() < 1e-6 * best, "{t}: offered rate");
            assert!(p.p50_ns > 0.0 && p.p50_ns <= p.p99_ns, "{t} u = {}: {p:?}", p.offered_fraction);
            let r = lowlat_report::model_response_ns(service, p.offered_fraction);
            assert!(
                (p.model_ns - r).abs() <= 1e-9 * r,
                "{t} u = {}: model {} against s/(1-u) {r}",
                p.offered_fraction,
                p.model_ns
            );
        }
    }
}
