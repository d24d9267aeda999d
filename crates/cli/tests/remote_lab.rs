//! `lowlat agent` and `lowlat lab --remote`: an agent refuses a caller without its key, starts
//! only what it is asked for by role, stops its children by PID (when asked, when their
//! laboratory goes away, when it stops itself), and `lab --quick --remote` between two network
//! namespaces joined by a veth pair (two hosts, as far as the run can tell) measures the
//! network transports across the link, names both machines and the link's floor, and keeps
//! shared memory here. Every process started here is stopped by PID; every wait is bounded.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lowlat_lab::agent::{AgentClient, AgentError, Role, Scheme};
use lowlat_lab::procs::{self, ServerProcess};
use lowlat_testkit::testhosts::{root_or_skip, TestHosts};

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");

fn key_file(dir: &Path, name: &str, byte: u8) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, [byte; 32]).unwrap();
    p
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes: it runs nothing and holds no port.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// Waits up to `within` for `pid` to be gone.
fn gone_within(pid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// An agent on loopback, its standard error (where it logs each child it starts) read line by
/// line.
struct LocalAgent {
    child: Child,
    addr: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl LocalAgent {
    fn start(key: &Path, extra: &[&str]) -> LocalAgent {
        let mut child = Command::new(EXE)
            .args(["agent", "tcp://127.0.0.1:0", "--psk-file"])
            .arg(key)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, log) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (otx, orx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = otx.send(line);
            }
        });
        let mut addr = None;
        loop {
            match orx.recv_timeout(Duration::from_secs(10)) {
                Ok(l) if l == "ready" => break,
                Ok(l) => addr = l.strip_prefix("serving tcp://").map(String::from).or(addr),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the agent did not become ready within 10 s");
                }
            }
        }
        LocalAgent { child, addr: addr.expect("the agent printed its address"), log }
    }

    /// The PID of the next child the agent says it started, within `within`.
    fn next_started(&self, within: Duration) -> Option<u32> {
        let until = Instant::now() + within;
        while let Ok(line) = self.log.recv_timeout(until.saturating_duration_since(Instant::now())) {
            if let Some(rest) = line.split_once("started pid=").map(|(_, r)| r) {
                return rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok();
            }
        }
        None
    }

    /// SIGTERM, then the agent's exit within `within` (killed and failed otherwise).
    fn stop(mut self, within: Duration) {
        lowlat_sys::terminate(self.child.id()).unwrap();
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "the agent ended with {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("the agent did not stop within {within:?} of SIGTERM");
    }
}

impl Drop for LocalAgent {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn an_agent_refuses_callers_without_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", 7);
    let agent = LocalAgent::start(&key, &[]);
    match AgentClient::connect(&agent.addr, None) {
        Err(AgentError::Refused { source: lowlat::Error::KeyMismatch { reason, .. }, .. }) => {
            assert_eq!(reason, lowlat::KeyMismatch::ServerRequiresKey)
        }
        other => panic!("an unkeyed caller was not refused at bind: {other:?}"),
    }
    let wrong = lowlat::read_psk_file(key_file(dir.path(), "wrong", 9)).unwrap();
    let e = AgentClient::connect(&agent.addr, Some(wrong)).unwrap_err();
    assert!(matches!(e, AgentError::Refused { .. }), "{e}");
    // The message says what to do.
    let e = AgentClient::connect(&agent.addr, None).unwrap_err().to_string();
    assert!(e.contains("refused this client") && e.contains("requires a pre-shared key"), "{e}");

    // The laboratory's command line says the same, and fails.
    let out = Command::new(EXE)
        .args(["lab", "--quick", "--remote", &agent.addr, "--agent-key"])
        .arg(dir.path().join("wrong"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused this client"), "{err}");
    // Keyed servers there bind with the agent's key: another --psk-file is refused up front.
    let out = Command::new(EXE)
        .args(["lab", "--quick", "--remote", &agent.addr, "--agent-key"])
        .arg(&key)
        .arg("--psk-file")
        .arg(dir.path().join("wrong"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("must hold the agent's key"), "{err}");

    // With the key: what it cannot play is refused with its reason, and nothing starts.
    let c = AgentClient::connect(&agent.addr, Some(lowlat::read_psk_file(&key).unwrap())).unwrap();
    let e = c.spawn(Role::Workload { seconds: 1e9 }).unwrap_err().to_string();
    assert!(e.contains("a workload of"), "{e}");
    let e = c.spawn(Role::Raw { scheme: Scheme::Udp, spin: "--help".into() }).unwrap_err().to_string();
    assert!(e.contains("spin policy"), "{e}");
    assert_eq!(c.close().unwrap(), 0);
    agent.stop(Duration::from_secs(10));
}

#[test]
fn an_agent_stops_its_children_by_pid() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", 3);
    let psk = lowlat::read_psk_file(&key).unwrap();
    let agent = LocalAgent::start(&key, &[]);
    let c = AgentClient::connect(&agent.addr, Some(psk.clone())).unwrap();
    let m = c.machine().unwrap();
    assert_eq!(m.nic.as_ref().map(|n| n.name.as_str()), Some("lo"), "{m:?}");

    // A keyed server there answers a keyed caller here.
    let rpc = c.spawn(Role::Rpc { scheme: Scheme::Udp, spin: "0".into(), keyed: true }).unwrap();
    let uri = rpc.uris[0].clone();
    assert!(uri.starts_with("udp://127.0.0.1:"), "{uri}");
    let cfg = lowlat::ClientConfig { psk: Some(psk), ..Default::default() };
    lowlat_lab::interface::LabClient::connect(&uri, cfg).unwrap().null().unwrap();
    let rpc_pid = rpc.pid;
    let raw = c.spawn(Role::Raw { scheme: Scheme::Tcp, spin: "0".into() }).unwrap();
    let work = c.spawn(Role::Workload { seconds: 30.0 }).unwrap();
    assert_eq!(work.next_line(Duration::from_secs(1)), None, "the workload printed before its end");
    let pids = [rpc_pid, raw.pid, work.pid];
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");

    // Stopped when dropped, by PID.
    drop(rpc);
    assert!(gone_within(rpc_pid, Duration::from_secs(5)), "the server {rpc_pid} outlived its stop");
    // The rest when the agent stops.
    std::mem::forget((raw, work));
    agent.stop(Duration::from_secs(10));
    for p in &pids[1..] {
        assert!(gone_within(*p, Duration::from_secs(1)), "child {p} outlived its agent");
    }
    // The lease's thread has no agent to renew with; closing says so rather than hanging.
    assert!(c.close().is_err());
}

#[test]
fn an_agent_stops_the_children_of_a_laboratory_that_went_away() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", 5);
    let agent = LocalAgent::start(&key, &["--lease", "1"]);
    let mut lab = Command::new(EXE)
        .args(["lab", "--quick", "--remote", &agent.addr, "--agent-key"])
        .arg(&key)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = agent.next_started(Duration::from_secs(60));
    // The laboratory dies without a word: its lease lapses within a second, and the agent
    // stops what it started for it.
    lab.kill().unwrap();
    lab.wait().unwrap();
    let pid = started.expect("the laboratory had the agent start a server");
    assert!(gone_within(pid, Duration::from_secs(5)), "child {pid} outlived its laboratory's lease");
    agent.stop(Duration::from_secs(10));
}

/// Runs `cmd` to its end within `within`, killing it (by PID) past that.
fn run_within(mut cmd: Command, within: Duration) -> (std::process::ExitStatus, String, Duration) {
    let started = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} took more than {within:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, reader.join().unwrap(), started.elapsed())
}

#[test]
fn quick_lab_across_two_namespaces() {
    if !root_or_skip() {
        return;
    }
    let hosts = TestHosts::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key", 11);
    let listen = format!("tcp://{}:0", hosts.a.addr);
    let mut cmd = hosts.a.command(EXE);
    cmd.args(["agent", &listen, "--psk-file"]).arg(&key);
    let agent: ServerProcess = procs::spawn_command(cmd, Duration::from_secs(10)).unwrap();
    let addr = agent.uris[0].strip_prefix("tcp://").unwrap().to_string();

    let out = dir.path().join("out");
    let mut lab = hosts.b.command(EXE);
    lab.args(["lab", "--quick", "--remote", &addr, "--agent-key"]).arg(&key).arg("--out").arg(&out);
    // The peers run on this machine whatever --remote says, and the local laboratory's test
    // covers them: a folder without their scripts keeps this run short.
    let no_peers = dir.path().join("no-peers");
    std::fs::create_dir(&no_peers).unwrap();
    lab.env("LOWLAT_PEERS_DIR", &no_peers);
    let (status, text, took) = run_within(lab, Duration::from_secs(600));
    assert!(status.success(), "lab --remote failed:\n{text}");
    // What it measured (seen with --nocapture).
    eprintln!("{text}\nlab --quick --remote took {took:?}");
    let agent_pid = agent.pid();
    let left = agent.stop(Duration::from_secs(10));
    assert!(!alive(agent_pid), "the agent outlived its stop: {left:?}");

    let json = std::fs::read_to_string(out.join("results.json")).unwrap();
    lowlat_report::schema::validate(&serde_json::from_str(&json).unwrap()).unwrap();
    let r = lowlat_report::Results::from_json(&json).unwrap();
    let remote = r.remote.as_ref().expect("the results name the other host");
    assert_eq!(remote.agent, addr);
    let there = remote.machine.nic.as_ref().expect("the agent described its interface");
    assert_eq!(
        (there.name.as_str(), there.address.as_deref()),
        (hosts.a.iface.as_str(), Some(&*hosts.a.addr.to_string()))
    );
    assert_eq!(there.driver.as_deref(), Some("veth"));
    let here = r.machine.nic.as_ref().expect("this machine's interface toward the agent");
    assert_eq!(here.name, hosts.b.iface);
    let floor = remote.link_floor.expect("the link's floor");
    assert!(floor.p50_ns > 0.0 && floor.p50_ns <= floor.p99_ns, "{floor:?}");

    for t in ["udp", "udp-block", "tcp", "onc+udp", "onc+tcp", "eth", "xdp"] {
        let row = r.ladder.iter().find(|x| x.transport == t && x.size == 32).unwrap_or_else(|| panic!("no {t} rung"));
        assert!(row.across_link, "{t} was not measured across the link");
        let rpc = row.rpc.unwrap_or_else(|| panic!("{t}: no RPC figure: {:?}", row.skipped));
        let raw = row.raw.unwrap_or_else(|| panic!("{t}: no raw figure: {:?}", row.skipped));
        assert!(rpc.p50_ns > 0.0 && raw.p50_ns > 0.0, "{t}: {row:?}");
    }
    let xdp_floor = r.ladder.iter().find(|x| x.transport == "xdp-floor" && x.size == 32).unwrap();
    assert!(xdp_floor.across_link && xdp_floor.raw.is_some(), "{xdp_floor:?}");
    for t in ["shm-spin", "shm-block", "unix"] {
        let row = r.ladder.iter().find(|x| x.transport == t && x.size == 32).unwrap();
        assert!(!row.across_link && row.raw.is_some(), "{t}: {row:?}");
    }
    assert!(remote.local_only.iter().any(|l| l.contains("shared memory")), "{:?}", remote.local_only);
    assert!(r.busy_server.rows.iter().all(|b| b.rpc.is_some()), "{:?}", r.busy_server.rows);
    assert!(r.threads.iter().filter(|t| t.transport == "udp").all(|t| t.calls_per_s.is_some()));
    assert!(r.cold.iter().filter(|c| c.transport == "tcp").all(|c| c.first_call_ns.is_some()));
    assert!(r.load.iter().all(|l| l.skipped.is_none()), "{:?}", r.load);
    // Saturation across the link: udp against the link's floor, tcp alone; shm stays here.
    for s in r.saturation.iter().filter(|s| s.transport != "shm") {
        assert!(s.skipped.is_none() && !s.points.is_empty(), "{}: {:?}", s.transport, s.skipped);
        for row in &s.rows {
            assert!(row.calls_per_s.is_some() && row.skipped.is_none(), "{}: {row:?}", s.transport);
            assert_eq!(row.floor_exchanges_per_s.is_some(), s.transport == "udp", "{}: {row:?}", s.transport);
        }
    }

    assert!(text.contains("Two hosts") && text.contains("the link's floor"), "{text}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for s in ["Link floor", "↔ link", "Stays here", hosts.a.iface.as_str(), hosts.b.iface.as_str()] {
        assert!(html.contains(s), "the report lacks {s:?}");
    }
}
