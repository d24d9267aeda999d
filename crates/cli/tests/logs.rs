//! The command's logs: `lowlat serve` writes lowlat's events to standard error, one JSON object
//! per line with `--log-format json`, filtered by `RUST_LOG`; its standard output stays its own.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");

/// `lowlat serve` with `args`, `RUST_LOG` as given: the process and the URI it serves once ready.
fn serve(args: &[&str], rust_log: Option<&str>) -> (Child, String) {
    let mut cmd = Command::new(EXE);
    cmd.arg("serve").args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    match rust_log {
        Some(filter) => cmd.env("RUST_LOG", filter),
        None => cmd.env_remove("RUST_LOG"),
    };
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut uri = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(u) = line.strip_prefix("serving ") {
            uri = Some(u.to_string());
        }
        if line == "ready" {
            break;
        }
    }
    (child, uri.expect("a `serving URI` line"))
}

/// Connects from 127.0.0.1 to a server that allows only 10.0.0.0/8 (dropped, and logged), then
/// stops the server: what it wrote to standard error.
fn refused_connection_logs(args: &[&str], rust_log: Option<&str>) -> String {
    let mut all = vec!["tcp://127.0.0.1:0", "--allow", "10.0.0.0/8"];
    all.extend_from_slice(args);
    let (mut child, uri) = serve(&all, rust_log);
    let addr = uri.strip_prefix("tcp://").unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    // The server closes the connection at once: then it has logged.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.read(&mut [0u8; 16]);
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    child.wait().unwrap();
    err
}

#[test]
fn serve_writes_json_log_lines_with_fields() {
    let err = refused_connection_logs(&["--log-format", "json"], None);
    let events: Vec<serde_json::Value> =
        err.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))).collect();
    let dropped =
        events.iter().find(|e| e["target"] == "lowlat::tcp").unwrap_or_else(|| panic!("no lowlat::tcp event in {err}"));
    assert_eq!(dropped["level"], "WARN", "{dropped}");
    let f = &dropped["fields"];
    assert_eq!(f["message"], "dropped a connection from outside the allowlist", "{dropped}");
    assert!(f["endpoint"].as_str().is_some_and(|e| e.starts_with("127.0.0.1:")), "{dropped}");
    assert!(f["peer"].as_str().is_some_and(|p| p.starts_with("127.0.0.1:")), "{dropped}");
    assert_eq!(f["at_most_every_s"], 10, "{dropped}");
    assert!(dropped["timestamp"].is_string(), "{dropped}");
}

#[test]
fn serve_logs_text_by_default_and_obeys_rust_log() {
    let err = refused_connection_logs(&[], None);
    let line = err.lines().find(|l| l.contains("lowlat::tcp")).unwrap_or_else(|| panic!("no event in {err}"));
    assert!(
        line.contains("WARN") && line.contains("dropped a connection") && line.contains("peer=127.0.0.1:"),
        "{line}"
    );
    let err = refused_connection_logs(&[], Some("lowlat::tcp=off"));
    assert!(!err.contains("lowlat::tcp"), "filtered out by RUST_LOG: {err}");
}
