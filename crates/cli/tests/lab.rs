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
    for heading in
        ["The ladder", "A busy server", "Threads", "Load", "Cold calls", "Peers", "Where the time of a null call"]
    {
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
    assert!(!results.threads.is_empty() && !results.load.is_empty() && !results.cold.is_empty());
    assert!(results.peers.iter().any(|p| p.system == "lowlat" && p.p50_ns.is_some()));

    let logs = std::fs::read_dir(dir.path().join("histograms")).unwrap().count();
    assert!(logs >= 10, "only {logs} histogram logs");

    let html_path = dir.path().join("report.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    for id in ["ladder", "busy", "threads", "load", "cold", "peers", "accounting"] {
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
