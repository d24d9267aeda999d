//! The peer systems (peers/): built from Debian packages by peers/build.sh, each server started,
//! its client run for a null call and a 1440-byte echo, and its one JSON line checked with the
//! same parser the lab uses.
//!
//! A peer whose packages are missing is skipped by build.sh with its reason, and this test only
//! prints it, unless LOWLAT_REQUIRE_PEERS=1 (set by CI after scripts/deps/peers.sh), where a
//! skipped peer fails the test.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use lowlat_report::peers::{parse_peer_list, parse_skipped, PeerSetup};
use lowlat_report::BenchLine;

const CALLS: u64 = 300;
/// The first build of the iceoryx2 peer compiles iceoryx2 itself.
const BUILD_TIMEOUT: Duration = Duration::from_secs(900);
const READY_TIMEOUT: Duration = Duration::from_secs(15);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Waits for a child with a deadline; kills it by PID and fails when the deadline passes.
fn wait_bounded(mut child: Child, timeout: Duration, what: &str) -> std::process::Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("collect output");
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A started peer server; stopped with SIGTERM (and killed if it ignores it) when dropped.
struct Server {
    child: Option<Child>,
    name: String,
}

impl Server {
    fn start(program: &Path, addr: &str, name: &str) -> Server {
        let mut child = Command::new(program)
            .args(["--serve", addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} server: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server { child: Some(child), name: name.to_owned() };
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) if line == "ready" => server,
            other => {
                server.stop();
                panic!("{name} server did not say ready: {other:?}");
            }
        }
    }

    /// Sends SIGTERM by PID and checks the server exits cleanly within the deadline.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("{} server ignored SIGTERM for {STOP_TIMEOUT:?}", self.name);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback port free for both TCP and UDP at the moment of asking.
fn free_port() -> u16 {
    for _ in 0..100 {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let port = tcp.local_addr().unwrap().port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port");
}

fn run_client(program: &Path, addr: &str, size: u32) -> std::process::Output {
    let child = Command::new(program)
        .args(["--connect", addr, "--calls", &CALLS.to_string(), "--warmup", "20"])
        .args(["--size", &size.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start client");
    wait_bounded(child, CLIENT_TIMEOUT, "peer client")
}

struct Built {
    dir: PathBuf,
    setups: Vec<PeerSetup>,
}

/// Builds the peers once per test run, into the target directory's scratch space.
fn build_peers() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(build_peers_now)
}

fn build_peers_now() -> Built {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("peers");
    let child = Command::new("bash")
        .arg(repo_root().join("peers/build.sh"))
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run peers/build.sh");
    let out = wait_bounded(child, BUILD_TIMEOUT, "peers/build.sh");
    assert!(out.status.success(), "build.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    let skipped = std::fs::read_to_string(dir.join("skipped.txt")).expect("skipped.txt");
    for (name, reason) in parse_skipped(&skipped).expect("skipped.txt is well formed") {
        eprintln!("SKIPPED peer {name}: {reason}");
    }
    if std::env::var("LOWLAT_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        assert!(skipped.trim().is_empty(), "peers are required but some were skipped:\n{skipped}");
    }
    let list = std::fs::read_to_string(dir.join("peers.txt")).expect("peers.txt");
    let setups = parse_peer_list(&list).expect("peers.txt is well formed");
    Built { dir, setups }
}

#[test]
fn every_built_peer_answers_and_reports_sane_figures() {
    let built = build_peers();
    let ipc_dir = tempfile::tempdir().unwrap();
    for setup in &built.setups {
        let (system, transport) = (&setup.system, &setup.transport);
        let program = built.dir.join(&setup.program);
        let addr = setup.address(free_port(), ipc_dir.path());
        let name = format!("{system}/{transport}");
        let mut server = Server::start(&program, &addr, &name);
        for (size, proc) in [(0u32, "null"), (1440, "echo")] {
            let out = run_client(&program, &addr, size);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{name} client (size {size}) failed: {stderr}");
            let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(lines.len(), 1, "{name}: expected one JSON line, got {stdout:?}");
            let b = BenchLine::parse(lines[0]).unwrap_or_else(|e| panic!("{name}: {e}: {}", lines[0]));
            assert_eq!(b.kind, "rpc");
            assert_eq!(b.system.as_deref(), Some(system.as_str()));
            assert_eq!(&b.transport, transport);
            assert_eq!((b.proc.as_str(), b.size), (proc, size));
            assert_eq!((b.calls, b.threads), (CALLS, 1));
            assert!(b.p50_ns > 0.0 && b.p50_ns <= b.p99_ns, "{name}: {b:?}");
            // Loopback round trips take microseconds, shared memory a fraction of one: not
            // nanoseconds or seconds.
            let least = if transport == "shm" { 30.0 } else { 1_000.0 };
            assert!(b.p50_ns > least && b.p50_ns < 100_000_000.0, "{name}: p50 {}", b.p50_ns);
            eprintln!("{name} {proc}: p50 {:.1} µs, p99 {:.1} µs", b.p50_ns / 1e3, b.p99_ns / 1e3);
        }
        let status = server.stop().expect("server was running");
        assert!(status.success(), "{name} server did not exit cleanly on SIGTERM: {status}");
    }
}

#[test]
fn peers_refuse_bad_command_lines() {
    let built = build_peers();
    let mut programs: Vec<&String> = built.setups.iter().map(|s| &s.program).collect();
    programs.dedup();
    for program in programs {
        let path = built.dir.join(program);
        for args in [
            &["--connect", "tcp://127.0.0.1:1", "--size", "abc"][..],
            &["--connect", "tcp://127.0.0.1:1", "--calls", "0"],
            &["--connect", "tcp://127.0.0.1:1", "--size", "99999999999"],
            &["--serve", "tcp://127.0.0.1:1", "--connect", "tcp://127.0.0.1:1"],
            &["--bogus", "1"],
            &["--calls"],
        ] {
            let child = Command::new(&path)
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start peer");
            let out = wait_bounded(child, Duration::from_secs(10), program);
            assert_eq!(out.status.code(), Some(2), "{program} {args:?} should be a usage error");
            assert!(out.stdout.is_empty(), "{program} {args:?} printed a result");
            assert!(!out.stderr.is_empty(), "{program} {args:?} did not say what was wrong");
        }
    }
}

#[test]
fn onc_client_fails_fast_without_a_server() {
    let built = build_peers();
    if !built.setups.iter().any(|s| s.system == "rpcgen") {
        eprintln!("SKIPPED: rpcgen peer not built");
        return;
    }
    let addr = format!("tcp://127.0.0.1:{}", free_port());
    let out = run_client(&built.dir.join("onc_peer"), &addr, 0);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach"));
}

#[test]
fn build_skips_peers_whose_libraries_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    // pkg-config finds nothing in an empty search path, as on a machine without the -dev packages.
    let child = Command::new("bash")
        .arg(repo_root().join("peers/build.sh"))
        .arg(dir.path())
        .env("PKG_CONFIG_LIBDIR", dir.path().join("no-such-dir"))
        .env("PKG_CONFIG_PATH", "")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run peers/build.sh");
    let out = wait_bounded(child, BUILD_TIMEOUT, "peers/build.sh");
    assert!(out.status.success(), "a skipped peer must not fail the build");
    let skipped = std::fs::read_to_string(dir.path().join("skipped.txt")).unwrap();
    let names: Vec<&str> = skipped.lines().map(|l| l.split(": ").next().unwrap()).collect();
    assert_eq!(names, ["grpc", "zeromq", "rpcgen"], "skipped.txt: {skipped}");
    assert!(skipped.lines().all(|l| l.split(": ").nth(1).is_some_and(|r| !r.is_empty())));
    // Only the peer that needs no system library (iceoryx2, built with cargo) is left.
    let list = std::fs::read_to_string(dir.path().join("peers.txt")).unwrap();
    assert!(list.lines().all(|l| l.starts_with("iceoryx2 ")), "peers.txt: {list}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipping grpc"));
}
