//! The example's binaries end to end, as a user runs them: `inventory-server` on udp, tcp, shm
//! and onc+udp from one process, `inventory-client` against each, then a graceful stop by
//! SIGTERM while a call is in flight. Every wait is bounded; every process is stopped by its PID.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lowlat_example_inventory::InventoryV1Client;

/// A child process, killed by its PID if the test ends without waiting for it.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Process {
    /// Waits at most `within` for the process to end; its exit status and what it wrote.
    fn finish(mut self, within: Duration) -> (std::process::ExitStatus, String, String) {
        let end = Instant::now() + within;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                let read = |r: Option<&mut dyn std::io::Read>| {
                    let mut s = String::new();
                    if let Some(r) = r {
                        r.read_to_string(&mut s).unwrap();
                    }
                    s
                };
                let out = read(self.0.stdout.as_mut().map(|o| o as &mut dyn std::io::Read));
                let err = read(self.0.stderr.as_mut().map(|e| e as &mut dyn std::io::Read));
                return (status, out, err);
            }
            assert!(Instant::now() < end, "process {} did not end within {within:?}", self.0.id());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The server (`--async`: its async implementation), started on `uris`, once it has said `ready`; its stdout lines keep coming on
/// the channel.
fn start_server(asynchronous: bool, uris: &[String]) -> (Process, Vec<String>, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inventory-server"))
        .args(asynchronous.then_some("--async"))
        .args(uris)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Process(child);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut served = Vec::new();
    loop {
        let line = lines.recv_timeout(Duration::from_secs(10)).expect("the server says `ready` within 10 s");
        match line.strip_prefix("serving ") {
            Some(uri) => served.push(uri.to_string()),
            None if line == "ready" => break,
            None => panic!("unexpected line from the server: {line}"),
        }
    }
    (server, served, lines)
}

fn client(uri: &str, asynchronous: bool) -> String {
    let child = Command::new(env!("CARGO_BIN_EXE_inventory-client"))
        .args(asynchronous.then_some("--async"))
        .arg(uri)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, out, err) = Process(child).finish(Duration::from_secs(30));
    assert!(status.success(), "inventory-client {uri}: {status}\n{out}\n{err}");
    out
}

#[test]
fn the_client_is_served_on_every_scheme_and_a_signal_stops_the_server_gracefully() {
    sessions_then_graceful_stop(false);
}

/// The same of `inventory-server --async`, whose procedures are the generated async trait's
/// (AUDIT awaiting a tokio timer rather than running on the worker pool): the same answers on
/// every scheme, and a stop that waits for the AUDIT call pending at the signal.
#[test]
fn the_async_server_answers_as_the_blocking_one_and_stops_as_gracefully() {
    sessions_then_graceful_stop(true);
}

fn sessions_then_graceful_stop(asynchronous_server: bool) {
    let dir = tempfile::tempdir().unwrap();
    let listen = [
        "udp://127.0.0.1:0".to_string(),
        "tcp://127.0.0.1:0".to_string(),
        format!("shm://{}", dir.path().join("inventory.sock").display()),
        "onc+udp://127.0.0.1:0".to_string(),
    ];
    let (server, uris, lines) = start_server(asynchronous_server, &listen);
    assert_eq!(uris.len(), 4, "{uris:?}");
    let mut stocked = 0;
    // Each scheme's session twice: blocking, then async (the generated client's futures, on
    // tokio), which gives the same answers.
    for (uri, asynchronous) in uris.iter().flat_map(|u| [(u, false), (u, true)]) {
        let out = client(uri, asynchronous);
        // The server's state carries over from one client to the next: three more hammers each.
        stocked += 3;
        let lines: Vec<&str> = out.lines().collect();
        let want = [
            "NULL -> ok".to_string(),
            format!("ADD 3 hammer -> {stocked} in stock"),
            format!("TAKE {} hammer -> short: {stocked} in stock", stocked + 1),
            format!("TAKE 1 hammer -> {} left", stocked - 1),
            "TAKE 1 unobtainium -> unknown item".to_string(),
            format!("LIST TOOL -> hammer ({}, claw)", stocked - 1),
        ];
        assert_eq!(lines[..want.len()], want, "{uri}:\n{out}");
        stocked -= 1;
        // The procedure's reason comes with its error over lowlat's protocol; ONC RPC has no
        // place for it (the server logs it instead).
        let failed = format!(
            "ADD 0 nails -> error: {uri}: ADD (program 0x20494e56 version 1, procedure 1) failed on the server"
        );
        let reason = ": nothing to add: nails came with a count of 0";
        let want = if uri.starts_with("onc+") { failed } else { format!("{failed}{reason}") };
        assert!(lines.contains(&want.as_str()), "{uri}: no line `{want}` in\n{out}");
        assert_eq!(lines.contains(&"NULL x64 at once -> ok"), asynchronous, "{uri}:\n{out}");
        assert_eq!(lines.last().copied(), Some(format!("AUDIT -> {stocked} things in all").as_str()), "{uri}:\n{out}");
    }

    // SIGTERM while a call is in flight (AUDIT takes 300 ms, on the worker pool or pending): the call
    // completes, the server says so, and ends cleanly.
    let audit = {
        let uri = uris[0].clone();
        std::thread::spawn(move || InventoryV1Client::connect(&uri).and_then(|c| c.audit()))
    };
    std::thread::sleep(Duration::from_millis(100));
    lowlat_sys::terminate(server.0.id()).unwrap();
    let stopped = lines.recv_timeout(Duration::from_secs(10)).expect("the server reports its stop");
    assert_eq!(stopped, "stopped: 1 calls finished during the stop, 0 refused, 0 cut short");
    let (status, _, err) = server.finish(Duration::from_secs(10));
    assert!(status.success(), "{status}: {err}");
    // What the ONC RPC caller could not be told, the server logged (through its subscriber).
    let logged = err.lines().find(|l| l.contains("lowlat::onc") && l.contains("ONC RPC call failed"));
    let logged = logged.unwrap_or_else(|| panic!("no lowlat::onc event in {err}"));
    for field in ["WARN", "program=541675094", "procedure=1", "name=\"ADD\"", "reason=nothing to add"] {
        assert!(logged.contains(field), "{field} in {logged}");
    }
    let total = audit.join().unwrap().expect("the call in flight completed");
    assert_eq!(total, stocked);
    assert!(!dir.path().join("inventory.sock").exists(), "the shm socket file is removed on a clean stop");
}
