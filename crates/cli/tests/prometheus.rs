//! `lowlat serve --metrics` scraped by a real Prometheus (Debian's, installed by
//! scripts/deps/prometheus.sh): the test starts Prometheus with a scrape configuration of its
//! own pointing at a lowlat server under a known load (SPIN calls of 2 ms, sent on schedule),
//! waits for scrapes, and asks Prometheus' HTTP API for the call rate and the median of the
//! calls' durations on the server: the rate must match the rate the load generator sent within
//! 10%, and the median must lie between the work each call asked for and the median latency the
//! load generator measured (a call's latency is its duration on the server, a round trip and the
//! caller's wake-up; the histogram's buckets, an eighth of an octave wide, read a quantile to
//! within 6%). `promtool check metrics` must accept the exposition.
//! Without Prometheus the test says so and passes, unless LOWLAT_REQUIRE_PROMETHEUS is set
//! (scripts/test.sh sets it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lowlat_lab::procs;

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");
/// The load: SPIN calls of this many µs (on the server's worker pool) at this rate.
const SPIN_US: u32 = 2000;
const RATE: u32 = 100;
const SECONDS: u32 = 12;

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// `GET path` from `host:port`, with an `Accept` header when given: the body.
fn http_get(addr: &str, path: &str, accept: Option<&str>) -> String {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(conn, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n").unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP answer: {resp}"));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// Percent-encodes a PromQL query for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value, at Unix time `at`, of an instant query that has exactly one series.
fn query(prometheus: &str, q: &str, at: f64) -> f64 {
    let body = http_get(prometheus, &format!("/api/v1/query?query={}&time={at:.3}", encode(q)), None);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
    let result = &v["data"]["result"];
    assert_eq!(result.as_array().map(Vec::len), Some(1), "{q}: {body}");
    result[0]["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{q}: {body}"))
}

/// A free TCP port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Prometheus, stopped (by PID) when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_prometheus(dir: &Path, target: &str, listen: &str) -> Prometheus {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: lowlat\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address={listen}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("start prometheus");
    let p = Prometheus(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = TcpStream::connect(listen).ok().and_then(|mut c| {
            write!(c, "GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
            let mut r = String::new();
            c.read_to_string(&mut r).ok()?;
            Some(r.starts_with("HTTP/1.1 200"))
        });
        if ready == Some(true) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus not ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prometheus_scrapes_the_rate_and_the_durations_the_load_generator_saw() {
    if !have("prometheus") || !have("promtool") {
        assert!(
            std::env::var_os("LOWLAT_REQUIRE_PROMETHEUS").is_none(),
            "prometheus and promtool are required (scripts/deps/prometheus.sh)"
        );
        eprintln!("skipped: prometheus not installed (scripts/deps/prometheus.sh)");
        return;
    }
    let args: Vec<String> = ["serve", "udp://127.0.0.1:0", "--metrics", "127.0.0.1:0"].map(String::from).to_vec();
    let server = procs::spawn(EXE.as_ref(), &args, Duration::from_secs(10)).unwrap();
    let uri = server.uris[0].clone();
    let metrics = server.metrics.clone().expect("serve prints where its metrics are");
    let target = metrics.trim_start_matches("http://").trim_end_matches("/metrics").to_string();

    // promtool accepts the exposition (the older text format a plain GET gets), and Prometheus'
    // own format comes when asked for.
    let text = http_get(&target, "/metrics", None);
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let om = http_get(&target, "/metrics", Some("application/openmetrics-text;version=1.0.0"));
    assert!(om.ends_with("# EOF\n") && om.contains("lowlat_calls_total{"), "{om}");

    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let _prometheus = start_prometheus(dir.path(), &target, &listen);

    // The load: open loop, SPIN calls at RATE a second for SECONDS.
    let calls = (RATE * SECONDS).to_string();
    let (rate, size) = (RATE.to_string(), SPIN_US.to_string());
    let bench_args = [
        "bench", &uri, "--proc", "spin", "--size", &size, "--rate", &rate, "--calls", &calls, "--warmup", "10",
        "--json",
    ];
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let began = (Instant::now(), unix_now());
    let out = Command::new(EXE).args(bench_args).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "bench: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let mut objects =
        stdout.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")));
    let (latency, generator) = (objects.next().unwrap(), objects.next().unwrap());
    let sent_rate = generator["sent_calls_per_s"].as_f64().unwrap_or_else(|| panic!("{generator}"));
    let client_p50 = latency["p50_ns"].as_f64().unwrap() / 1e9;
    // Two more scrapes after the load, then queried at a moment inside it, over a window of
    // scrapes inside it: from a third to four fifths of the run.
    std::thread::sleep(Duration::from_secs(2));
    let run = began.0.elapsed().as_secs_f64() - 2.0;
    let at = began.1 + run * 0.8;
    let window = format!("{}s", (run * 0.45) as u64);
    let served_rate = query(&listen, &format!("sum(rate(lowlat_calls_total{{transport=\"udp\"}}[{window}]))"), at);
    let p50 = query(
        &listen,
        &format!("histogram_quantile(0.5, sum by (le) (rate(lowlat_call_duration_seconds_bucket{{procedure=\"SPIN\"}}[{window}])))"),
        at,
    );
    let spin = SPIN_US as f64 / 1e6;
    println!(
        "sent {sent_rate:.1} calls/s (offered {RATE}), Prometheus' rate {served_rate:.1} calls/s ({:.3}x); SPIN({SPIN_US} µs) calls: Prometheus' p50 of the server's durations {:.1} µs ({:.3}x the work sent; the client's p50 {:.1} µs)",
        served_rate / sent_rate,
        p50 * 1e6,
        p50 / spin,
        client_p50 * 1e6,
    );
    assert!((served_rate / sent_rate - 1.0).abs() <= 0.10, "rate {served_rate} against {sent_rate} sent");
    // A call's duration on the server is at least the work sent and at most the latency the
    // caller saw (its duration, a round trip and the caller's wake-up, which on a loaded two-core
    // host can add a few hundred µs); a bucket reads a quantile to within 6%.
    assert!(
        p50 >= spin * 0.94 && p50 <= client_p50 * 1.06,
        "p50 {p50} s: not between the work sent ({spin} s) and the load generator's p50 ({client_p50} s)"
    );
}
