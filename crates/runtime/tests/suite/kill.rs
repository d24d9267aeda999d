//! Kill loops: servers and clients killed with SIGKILL, as a crash leaves things (no goodbye, no
//! clean-up of their own). The servers and clients killed are processes of this test binary,
//! started in a role ([`ROLE`]) by the test they belong to, in the namespace their side of the
//! transport lives in.
//!
//! `LOWLAT_RESTART_CYCLES` and `LOWLAT_KILL_CYCLES` set the cycles (5 and 30 by default, for CI;
//! `scripts/kill-loops.sh` runs 100 and 1,000 and prints the figures).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, ServerConfig};

use super::{is_server_gone, join, Env, Transport};
use crate::common::{Lab, PROG};

/// Set in the environment of a process a kill loop starts from this test binary: `serve` or
/// `call`.
const ROLE: &str = "LOWLAT_CONFORMANCE_ROLE";
/// Where the role's process serves or calls.
const ROLE_URI: &str = "LOWLAT_CONFORMANCE_URI";
/// How long a serving role's sessions may idle, in milliseconds.
const ROLE_IDLE_MS: &str = "LOWLAT_CONFORMANCE_IDLE_MS";
/// How long a role's process lives at most, whatever happens to the test that started it.
const ROLE_LIFETIME: Duration = Duration::from_secs(120);

/// Cycles from the environment variable `var`, or `default`.
fn cycles(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Starts processes of this test binary, running `test` in a role, on either side of the
/// transport.
#[derive(Clone)]
struct Roles {
    test: String,
    /// The namespaces of the server's side and the client's side, where the transport has them.
    server_ns: Option<String>,
    client_ns: Option<String>,
}

impl Roles {
    fn new(env: &Env, test: &str) -> Roles {
        Roles {
            test: test.to_string(),
            server_ns: env.hosts.as_ref().map(|h| h.a.ns.clone()),
            client_ns: env.hosts.as_ref().map(|h| h.b.ns.clone()),
        }
    }

    /// A server of the suite's program at `uri`, whose sessions idle out after `idle`.
    fn serve(&self, uri: &str, idle: Duration) -> RoleProcess {
        self.start(self.server_ns.as_deref(), "serve", uri, &[(ROLE_IDLE_MS, idle.as_millis().to_string())])
    }

    /// A client calling ECHO at `uri` without end, ready once its first call was answered.
    fn call(&self, uri: &str) -> RoleProcess {
        self.start(self.client_ns.as_deref(), "call", uri, &[])
    }

    fn start(&self, ns: Option<&str>, role: &str, uri: &str, vars: &[(&str, String)]) -> RoleProcess {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args([&self.test, "--exact", "--test-threads=1", "--nocapture", "--quiet"])
            .env(ROLE, role)
            .env(ROLE_URI, uri);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let what = format!("{role} at {uri}");
        let mut child =
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("starting a role");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut p = RoleProcess { child, stdin, lines, uri: None };
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match p.lines.recv_timeout(left) {
                Ok(l) if l == "ready" => return p,
                Ok(l) => {
                    if let Some(u) = l.strip_prefix("serving ") {
                        p.uri = Some(u.to_string());
                    }
                }
                Err(_) => panic!("{what}: not ready within 10 s"),
            }
        }
    }
}

/// A process of this test binary in a role; killed with SIGKILL and reaped on drop.
struct RoleProcess {
    child: Child,
    /// Closing it ends a role's process that is still alive (its test ended).
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// The URI a serving role serves.
    uri: Option<String>,
}

impl RoleProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reaped.
    fn kill(&mut self) {
        lowlat_sys::kill(self.pid()).expect("killing a role's process");
        let _ = self.child.wait();
    }

    /// A serving role's sessions open, as its server's counters say.
    fn sessions_open(&mut self) -> u64 {
        let stdin = self.stdin.as_mut().expect("alive");
        writeln!(stdin, "sessions").expect("asking a serving role");
        let line = self.lines.recv_timeout(Duration::from_secs(5)).expect("a serving role answers within 5 s");
        line.strip_prefix("sessions_open ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
    }

    /// Open file descriptors, as /proc says.
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).expect("its fds").count()
    }

    /// Resident memory, KiB, as /proc says.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("its status");
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmRSS in kB")
    }
}

impl Drop for RoleProcess {
    fn drop(&mut self) {
        self.stdin.take();
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = lowlat_sys::kill(self.pid());
            let _ = self.child.wait();
        }
    }
}

/// Runs the role this process was started in, if any (and then the test it was started as
/// passes): `true` when it did.
pub fn run_role(t: &'static Transport) -> bool {
    let Ok(role) = std::env::var(ROLE) else { return false };
    let uri = std::env::var(ROLE_URI).expect("a role's URI");
    let env = Env::in_this_namespace(t);
    let born = Instant::now();
    match role.as_str() {
        "serve" => {
            let idle = Duration::from_millis(std::env::var(ROLE_IDLE_MS).unwrap().parse().unwrap());
            let cfg = ServerConfig { session_idle: idle, unused_session_idle: idle, ..ServerConfig::default() };
            let server = env.serve_at(&uri, cfg).expect("serving");
            println!("serving {}\nready", server.local_uris()[0]);
            // Answers questions until its stdin closes (its test ended) or it is killed.
            for line in std::io::stdin().lock().lines() {
                match line.as_deref() {
                    Ok("sessions") => {
                        let open: u64 = server.stats().iter().map(|(_, s)| s.sessions_open).sum();
                        println!("sessions_open {open}");
                    }
                    _ => break,
                }
            }
            server.shutdown();
        }
        "call" => {
            let cfg = ClientConfig {
                deadline: Duration::from_secs(2),
                bind_timeout: Duration::from_secs(2),
                ..ClientConfig::default()
            };
            let client = Client::connect_with(&uri, PROG, 1, cfg).expect("binding");
            let lab = Lab::new(&client);
            assert_eq!(lab.echo(b"first").expect("the first call"), b"first");
            println!("ready");
            while born.elapsed() < ROLE_LIFETIME {
                let _ = lab.echo(&[7; 300]);
            }
        }
        other => panic!("no role {other}"),
    }
    true
}

/// `uri` with its port 0 (if it has one) replaced by a free port below the ephemeral range: a
/// port from that range, free while its server is down, may be taken by any socket bound to
/// port 0 meanwhile (another test's, or a client's TCP connection to itself).
fn outside_the_ephemeral_range(uri: &str) -> String {
    let Some(base) = uri.strip_suffix(":0") else { return uri.to_string() };
    // Each test of the process starts its search elsewhere: two finding one port at once would
    // both take it.
    static TESTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = TESTS.fetch_add(1, Ordering::Relaxed);
    let first = 20_000 + ((std::process::id() + n * 997) % 10_000) as u16;
    for port in (first..30_000).chain(20_000..first) {
        let free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
            && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok();
        if free {
            return format!("{base}:{port}");
        }
    }
    panic!("no free port in 20000..30000")
}

/// What the callers of [`killed_server_restarted_on_the_same_address`] saw.
#[derive(Default)]
struct Seen {
    /// Calls answered, with when the answer came.
    answered: Vec<Instant>,
    /// Calls failed, with when.
    failed: Vec<(Instant, Error)>,
}

/// The server killed with SIGKILL while two threads call, and started again on the same
/// address, cycle after cycle: the same `Client` goes on working. Calls in flight when it died,
/// and made while it was down, fail with typed errors saying whether they may have executed;
/// soon after its return calls succeed again. Prints the time from its return to the first
/// answered call.
pub fn killed_server_restarted_on_the_same_address(t: &'static Transport, test: &str) {
    if run_role(t) {
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let roles = Roles::new(&env, test);
    let idle = Duration::from_secs(120);
    let server = roles.serve(&outside_the_ephemeral_range(&env.listen_uri()), idle);
    let served = server.uri.clone().expect("a serving role says where");
    let (listen, uri) = match t.client {
        Some(c) => (env.listen_uri(), env.expand(c)),
        None => (served.clone(), served),
    };
    let n = cycles("LOWLAT_RESTART_CYCLES", 5);
    let secs = 20 + n as u64 * 5;
    let scheme = t.scheme;
    let back_after = env.on_client(secs, move || {
        // Calls in flight when the server dies fail within the short deadline. A connection
        // is given the kernel's first SYN retransmission (1 s) and more: a SYN from a port whose
        // last connection the killed server left in TIME_WAIT, or one made while a slow host
        // is starved, is answered only by the second (CI saw a 500 ms connect time out).
        let cfg = ClientConfig {
            deadline: Duration::from_millis(500),
            bind_timeout: Duration::from_secs(3),
            ..ClientConfig::default()
        };
        let client = Arc::new(Client::connect_with(&uri, PROG, 1, cfg).unwrap());
        let mut server = server;
        let mut back_after = Vec::new();
        for cycle in 0..n {
            let seen = Arc::new(Mutex::new(Seen::default()));
            let stop = Arc::new(AtomicBool::new(false));
            let callers: Vec<_> = (0..2u8)
                .map(|i| {
                    let (c, seen, stop) = (client.clone(), seen.clone(), stop.clone());
                    std::thread::spawn(move || {
                        let lab = Lab::new(&c);
                        let msg = [i; 200];
                        while !stop.load(Ordering::Relaxed) {
                            let r = lab.echo(&msg);
                            let mut seen = seen.lock().unwrap();
                            match r {
                                Ok(got) => {
                                    assert_eq!(got, msg);
                                    seen.answered.push(Instant::now());
                                }
                                Err(e) => seen.failed.push((Instant::now(), e)),
                            }
                        }
                    })
                })
                .collect();
            let wait_for = |what: &str, done: &dyn Fn(&Seen) -> bool| {
                let end = Instant::now() + Duration::from_secs(10);
                while !done(&seen.lock().unwrap()) {
                    assert!(Instant::now() < end, "{scheme}, cycle {cycle}: {what} within 10 s");
                    std::thread::sleep(Duration::from_millis(1));
                }
            };
            wait_for("calls answered", &|s| s.answered.len() >= 20);
            let killed = Instant::now();
            server.kill();
            wait_for("a call failed", &|s| s.failed.iter().any(|(at, _)| *at > killed));
            server = roles.serve(&listen, idle);
            let back = Instant::now();
            wait_for("a call answered after the return", &|s| s.answered.iter().any(|at| *at > back));
            stop.store(true, Ordering::Relaxed);
            for h in callers {
                join(h, 5, "a calling thread");
            }
            let seen = seen.lock().unwrap();
            let first = *seen.answered.iter().find(|at| **at > back).unwrap();
            back_after.push(first - back);
            for (at, e) in &seen.failed {
                assert!(*at > killed, "{scheme}, cycle {cycle}: a call failed while the server was up: {e}");
                assert!(is_server_gone(e), "{scheme}, cycle {cycle}: {e}");
                // The error says whether the call may have run: a call never sent cannot have.
                if matches!(e, Error::ServerNotRunning { .. } | Error::BindTimeout { .. }) {
                    assert!(!e.may_have_executed(), "{e}");
                }
            }
            let lab = Lab::new(&client);
            for _ in 0..10 {
                assert_eq!(lab.echo(b"still there").unwrap(), b"still there", "{scheme}, cycle {cycle}");
            }
        }
        back_after
    });
    let mut sorted = back_after;
    sorted.sort();
    eprintln!(
        "{}: {n} kill -9 and restart cycles; from the server's return to the first answered call: median {:?}, max {:?}",
        t.scheme,
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );
}

/// Clients killed with SIGKILL in a loop, each after its first answered call, with calls in
/// flight: the server's open file descriptors and sessions return to what they were before the
/// loop (sessions by the idle timeout, set short here), and its resident memory grows by no
/// more than [`RSS_SLACK_KIB`].
pub fn killed_clients_leave_nothing_behind(t: &'static Transport, test: &str) {
    if run_role(t) {
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let roles = Roles::new(&env, test);
    let idle = Duration::from_millis(400);
    let mut server = roles.serve(&env.listen_uri(), idle);
    let uri = match t.client {
        Some(c) => env.expand(c),
        None => server.uri.clone().expect("a serving role says where"),
    };
    let kill_one = |roles: &Roles| {
        let mut c = roles.call(&uri);
        std::thread::sleep(Duration::from_millis(2));
        c.kill();
    };
    // Settled: no session left, and the fds as few as they get.
    let settle = |server: &mut RoleProcess, fds_at_most: usize| {
        let end = Instant::now() + idle * 3 + Duration::from_secs(5);
        loop {
            let (open, fds) = (server.sessions_open(), server.fds());
            if open == 0 && fds <= fds_at_most {
                return fds;
            }
            assert!(Instant::now() < end, "{}: {open} sessions, {fds} fds (at most {fds_at_most})", t.scheme);
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // Warm up: whatever the server makes once (threads, buffers, tables) it has made, on each
    // of its serving threads (clients reach them by a hash of their addresses: with 8 a
    // thread, the chance that one is missed is below 1e-4).
    for _ in 0..3 + 8 * (t.threads - 1) {
        kill_one(&roles);
    }
    let fds = settle(&mut server, usize::MAX);
    let rss = server.rss_kib();
    let n = cycles("LOWLAT_KILL_CYCLES", 30);
    let begun = Instant::now();
    for _ in 0..n {
        kill_one(&roles);
    }
    let took = begun.elapsed();
    let left_open = server.sessions_open();
    if !t.caps.reliable && !t.caps.xdr {
        // Nothing but the idle timeout tells a datagram server that its client died.
        assert!(left_open > 0, "{}: the killed clients' sessions were counted", t.scheme);
    }
    let fds_after = settle(&mut server, fds);
    let rss_after = server.rss_kib();
    eprintln!(
        "{}: {n} clients killed in {took:?}; server fds {fds} -> {fds_after}, RSS {rss} -> {rss_after} KiB, sessions 0 -> {left_open} -> 0",
        t.scheme
    );
    assert!(rss_after <= rss + RSS_SLACK_KIB, "{}: RSS grew from {rss} to {rss_after} KiB", t.scheme);
}

/// How much a server's resident memory may grow over a client kill loop: allocator slack and
/// pages first touched late, not a leak per client (the full loop's 1,000 clients leaking a
/// page each would fail it).
pub const RSS_SLACK_KIB: u64 = 2048;
