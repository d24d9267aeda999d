//! The transport conformance suite: every test written once, against a [`Transport`] (a scheme,
//! where its servers listen and its clients call, and what it can do), and instantiated for every
//! scheme by one line of [`conformance!`] in `tests/conformance.rs`.
//!
//! Transports that need root run their servers in one network namespace and their clients in
//! another, joined by a veth pair the test creates and removes (`lowlat_testkit::testhosts`); they are
//! skipped, with the reason printed, when the tests do not run as root.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Execution, Program, Server, ServerConfig, SpinPolicy};
use lowlat_testkit::testhosts::{self, TestHosts};

use crate::common::{bytes, lab_program_in, Encoding, Lab, MINUS, PROG};

mod keys;
mod kill;
mod stops;

pub use keys::*;
pub use kill::{killed_clients_leave_nothing_behind, killed_server_restarted_on_the_same_address};
pub use stops::*;

/// The suite's own procedures, numbered after the lab's (NULL to SPIN, 0 to 6).
/// Echoes its argument from the worker pool after `SLOW_FOR`: a long-running procedure.
pub const SLOW_ECHO: u32 = 10;
pub const SLOW_FOR: Duration = Duration::from_millis(300);
/// Sleeps `DROWSY_FOR` on the worker pool, then answers nothing: a call that outlives any
/// deadline the tests set.
pub const DROWSY: u32 = 11;
pub const DROWSY_FOR: Duration = Duration::from_millis(400);
/// Fails with a reason of its own that says how many bytes it was given ([`refusal`]).
pub const REFUSE: u32 = 12;
/// Fails with a reason far longer than an error frame carries: [`RAMBLE_LEN`] bytes of `é`.
pub const RAMBLE: u32 = 13;
pub const RAMBLE_LEN: usize = 3000;
/// Sleeps `SLEEPY_FOR` on the receiving thread (unless marked long-running at run time).
pub const SLEEPY: u32 = 14;
pub const SLEEPY_FOR: Duration = Duration::from_millis(500);
/// Names of the procedures the suite's servers serve, for clients that name them in errors.
pub const NAMES: &[(u32, &str)] =
    &[(0, "NULL"), (MINUS, "MINUS"), (DROWSY, "DROWSY"), (REFUSE, "REFUSE"), (RAMBLE, "RAMBLE"), (SLEEPY, "SLEEPY")];

/// What [`REFUSE`] says when given `n` bytes: not ASCII, to show it arrives as UTF-8 intact.
pub fn refusal(n: usize) -> String {
    format!("refusé: {n} bytes is not enough ✗")
}

/// A transport as the suite sees it.
pub struct Transport {
    pub scheme: &'static str,
    /// Where a server listens. `{dir}` is a fresh directory; `{a}` the server host's interface.
    pub listen: &'static str,
    /// Where a client calls; `None`: the URI the server reports. `{b}` is the client host's
    /// interface, `{a.mac}` the server host's MAC address.
    pub client: Option<&'static str>,
    pub caps: Caps,
    /// Serving threads per endpoint (`ServerConfig::threads`) of every server the suite starts.
    pub threads: usize,
}

/// What a transport can do, and what it needs.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Needs root: servers and clients in two network namespaces joined by veth.
    pub root: bool,
    /// Delivers every frame in order (no retransmission).
    pub reliable: bool,
    /// Bodies are XDR (ONC RPC).
    pub xdr: bool,
    /// The size of its rings, where messages cross rings (sizes around it are tested).
    pub ring: Option<usize>,
    /// Nothing tells a client that no server is there (raw frames to a peer's address): binding
    /// fails when its timeout passes, not at once.
    pub silent: bool,
}

/// One test's world: the transport, its test hosts or directory, and the suite's lock.
pub struct Env {
    pub t: &'static Transport,
    hosts: Option<TestHosts>,
    dir: std::path::PathBuf,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Joins `h`, failing the test if it has not finished within `secs`.
pub fn join<T>(h: JoinHandle<T>, secs: u64, what: &str) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    while !h.is_finished() {
        assert!(Instant::now() < end, "{what} did not finish within {secs} s");
        std::thread::sleep(Duration::from_millis(2));
    }
    match h.join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

impl Env {
    /// `None` (the test is skipped, and says why) where the transport needs root and the
    /// tests do not run as root.
    pub fn new(t: &'static Transport) -> Option<Env> {
        let hosts = if t.caps.root {
            if let Err(why) = testhosts::check_root() {
                eprintln!("SKIPPED ({}): {why}", t.scheme);
                return None;
            }
            Some(TestHosts::new().expect("creating test hosts"))
        } else {
            None
        };
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("lowlat-conf-{}-{}-{n}", t.scheme, std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Some(Env { t, hosts, dir })
    }

    /// The world of a process started in a role by a kill loop: already in the namespace of its
    /// side of the transport, URIs given to it whole.
    fn in_this_namespace(t: &'static Transport) -> Env {
        Env { t, hosts: None, dir: std::env::temp_dir().join(format!("lowlat-conf-role-{}", std::process::id())) }
    }

    pub fn encoding(&self) -> Encoding {
        if self.t.caps.xdr {
            Encoding::Xdr
        } else {
            Encoding::Native
        }
    }

    /// The lab's procedures, [`SLOW_ECHO`] and [`DROWSY`], in the transport's encoding.
    pub fn program(&self) -> Program {
        lab_program_in(self.encoding())
            .long_running(SLOW_ECHO, "SLOW_ECHO", |_, a, r| {
                std::thread::sleep(SLOW_FOR);
                r.extend_from_slice(a);
                Ok(())
            })
            .long_running(DROWSY, "DROWSY", |_, _, _| {
                std::thread::sleep(DROWSY_FOR);
                Ok(())
            })
            .procedure(REFUSE, "REFUSE", |_, a, _| Err(lowlat::ProcError::failed(refusal(a.len()))))
            .procedure(RAMBLE, "RAMBLE", |_, _, _| Err(lowlat::ProcError::failed("é".repeat(RAMBLE_LEN / 2))))
            .procedure(SLEEPY, "SLEEPY", |_, a, r| {
                std::thread::sleep(SLEEPY_FOR);
                r.extend_from_slice(a);
                Ok(())
            })
    }

    fn expand(&self, template: &str) -> String {
        let mut s = template.replace("{dir}", &self.dir.display().to_string());
        if let Some(h) = &self.hosts {
            s = s.replace("{a.mac}", &h.a.mac.to_string()).replace("{a}", &h.a.iface).replace("{b}", &h.b.iface);
        }
        s
    }

    /// Where a server listens.
    pub fn listen_uri(&self) -> String {
        self.expand(self.t.listen)
    }

    /// Serves [`program`](Self::program) at [`listen_uri`](Self::listen_uri); returns the
    /// server and the URI its clients call.
    pub fn serve(&self, cfg: ServerConfig) -> (Server, String) {
        self.serve_program(self.program(), cfg)
    }

    /// Serves [`program`](Self::program) at `uri` (on the server's host).
    pub fn serve_at(&self, uri: &str, cfg: ServerConfig) -> Result<Server, Error> {
        self.serve_program_at(self.program(), uri, cfg)
    }

    /// Serves `program` where [`serve`](Self::serve) would; returns the server and the URI its
    /// clients call.
    pub fn serve_program(&self, program: Program, cfg: ServerConfig) -> (Server, String) {
        let server = self.serve_program_at(program, &self.listen_uri(), cfg).expect("serving");
        let uri = match self.t.client {
            Some(c) => self.expand(c),
            None => server.local_uris()[0].clone(),
        };
        (server, uri)
    }

    fn serve_program_at(&self, program: Program, uri: &str, cfg: ServerConfig) -> Result<Server, Error> {
        let uri = uri.to_string();
        // Servers answer ONC RPC callers only as the test asks: never register with rpcbind.
        let cfg = ServerConfig { onc_register: false, threads: self.t.threads, ..cfg };
        let serve = move || Server::builder().program(program).config(cfg).serve(&[&uri]);
        match &self.hosts {
            Some(h) => join(h.a.spawn(serve), 10, "serving").expect("entering the server's namespace"),
            None => serve(),
        }
    }

    /// Runs `f` where this transport's clients live (a thread in the client's namespace, or
    /// any thread); fails the test if it takes longer than `secs`.
    pub fn on_client<T: Send + 'static>(&self, secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        match &self.hosts {
            Some(h) => join(h.b.spawn(f), secs, "the client side").expect("entering the client's namespace"),
            None => join(std::thread::spawn(f), secs, "the client side"),
        }
    }

    /// An address where no server listens, of this transport's kind.
    pub fn nobody_uri(&self) -> String {
        match self.t.scheme {
            "udp" | "onc+udp" => {
                let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                format!("{}://{}", self.t.scheme, s.local_addr().unwrap())
            }
            "tcp" | "onc+tcp" => {
                let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                format!("{}://{}", self.t.scheme, s.local_addr().unwrap())
            }
            _ => match self.t.client {
                Some(c) => self.expand(c),
                None => self.listen_uri(),
            },
        }
    }
}

/// Body bytes that make exactly one frame on `c`'s binding.
fn one_frame(c: &Client, enc: Encoding) -> usize {
    let s = c.session();
    if c.is_onc() {
        // A datagram (or a record fragment) holds the call's header, then the opaque's length.
        let header = 64;
        return (s.max_frame as usize - header - enc.opaque_len(0)) / 4 * 4;
    }
    s.frag_size() as usize
}

/// Every lab procedure at the edge sizes of the transport (nothing, one byte, one frame and a
/// byte either side, the ring's size and a byte either side, 1 MiB, as far as the binding's
/// largest message allows) from six threads at once on four slots, every result checked.
pub fn lab_procedures_at_edge_sizes(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let enc = env.encoding();
    env.on_client(120, move || {
        // More threads than slots: the extra ones wait for a slot.
        let cfg = ClientConfig { slots: 4, deadline: Duration::from_secs(30), ..ClientConfig::default() };
        let client = Arc::new(Client::connect_with(&uri, PROG, 1, cfg).unwrap());
        assert_eq!(Encoding::of(&client), enc);
        assert_eq!(client.session().reliable, t.caps.reliable, "whether the binding retransmits");
        let frame = one_frame(&client, enc);
        let largest = client.max_message() - enc.opaque_len(0) - if client.is_onc() { 64 } else { 0 };
        let mut sizes = vec![0, 1, frame - 1, frame, frame + 1];
        if let Some(ring) = t.caps.ring {
            sizes.extend([ring - 1, ring, ring + 1]);
        }
        sizes.extend([largest.min(1 << 20)]);
        sizes.retain(|&n| n <= largest);
        let threads: Vec<_> = (0..6u8)
            .map(|i| {
                let c = client.clone();
                let sizes = sizes.clone();
                std::thread::spawn(move || Lab::new(&c).check(i, &sizes))
            })
            .collect();
        for h in threads {
            join(h, 100, "a calling thread");
        }
    });
    server.shutdown();
}

/// The caller's deadline holds whether it busy-polls, blocks or adapts; the late reply is then
/// ignored and the binding goes on working.
pub fn deadline_holds_in_every_waiting_mode(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    env.on_client(30, move || {
        for spin in [SpinPolicy::Forever, SpinPolicy::Block, SpinPolicy::Adaptive, SpinPolicy::from_micros(20)] {
            let deadline = Duration::from_millis(100);
            let cfg = ClientConfig { deadline, spin, slots: 1, ..ClientConfig::default() };
            let client = Client::connect_with(&uri, PROG, 1, cfg).unwrap();
            let lab = Lab::new(&client);
            lab.null().unwrap();
            let begun = Instant::now();
            let e = bytes(DROWSY, &client, &[]).unwrap_err();
            let took = begun.elapsed();
            assert!(matches!(e, Error::Timeout { .. }), "{spin}: {e}");
            assert!(e.may_have_executed(), "{spin}: the call was sent: {e}");
            if !t.caps.reliable && !t.caps.xdr {
                // The server answered a retransmission with "working".
                assert!(matches!(e, Error::Timeout { execution: Execution::Started, .. }), "{spin}: {e}");
            }
            assert!(took >= deadline && took < DROWSY_FOR - Duration::from_millis(50), "{spin}: after {took:?}");
            // The same slot calls again while the late answer is still to come, then after.
            assert_eq!(lab.echo(b"after").unwrap(), b"after", "{spin}");
            std::thread::sleep(DROWSY_FOR);
            assert_eq!(lab.echo(b"later").unwrap(), b"later", "{spin}");
        }
    });
    server.shutdown();
}

/// A long-running procedure runs on the worker pool: a call to it that outlasts many
/// retransmission timeouts completes, once, and a fast call made meanwhile is not held up.
pub fn long_running_procedures_do_not_hold_up_others(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    env.on_client(30, move || {
        let client = Arc::new(Client::connect(&uri, PROG, 1).unwrap());
        let c = client.clone();
        let slow = std::thread::spawn(move || bytes(SLOW_ECHO, &c, b"slow").unwrap());
        std::thread::sleep(SLOW_FOR / 6);
        let begun = Instant::now();
        assert_eq!(Lab::new(&client).echo(b"fast").unwrap(), b"fast");
        assert!(begun.elapsed() < SLOW_FOR / 2, "a fast call waited {:?} for a slow one", begun.elapsed());
        assert_eq!(join(slow, 10, "the slow call"), b"slow");
    });
    server.shutdown();
}

/// A procedure marked long-running at run time (not only when its program was built) runs on
/// the worker pool: a 500 ms call to it does not hold up a fast call on the same endpoint. A
/// name the program does not have is a typed error naming those it has.
pub fn long_running_marked_at_run_time(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let e = env.program().mark_long_running("NO_SUCH").unwrap_err();
    assert!(matches!(&e, Error::NoSuchProcedure { name, .. } if name == "NO_SUCH"), "{e}");
    assert!(e.to_string().contains("SLEEPY"), "the error lists the procedures there are: {e}");
    let program = env.program().mark_long_running("SLEEPY").unwrap();
    assert!(program.procedures().any(|(n, name, long)| n == SLEEPY && name == "SLEEPY" && long));
    let (server, uri) = env.serve_program(program, ServerConfig::default());
    env.on_client(30, move || {
        let client = Arc::new(Client::connect(&uri, PROG, 1).unwrap());
        let c = client.clone();
        let slow = std::thread::spawn(move || bytes(SLEEPY, &c, b"sleepy").unwrap());
        std::thread::sleep(Duration::from_millis(100));
        let begun = Instant::now();
        assert_eq!(Lab::new(&client).echo(b"fast").unwrap(), b"fast");
        assert!(begun.elapsed() < SLEEPY_FOR / 2, "a fast call waited {:?} for a slow one", begun.elapsed());
        assert_eq!(join(slow, 10, "the slow call"), b"sleepy");
    });
    server.shutdown();
}

/// A procedure's own reason for failing reaches the caller intact over lowlat's protocol (cut
/// between characters to what an error frame carries); ONC RPC has no place for it, and says
/// only SYSTEM_ERR. Every error of a call names its endpoint and its procedure (by name, once
/// the client has been told names).
pub fn errors_carry_the_reason_and_name_the_call(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let onc = t.caps.xdr;
    env.on_client(30, move || {
        let cfg = ClientConfig { max_message: 64 << 10, ..ClientConfig::default() };
        let client = Client::connect_with(&uri, PROG, 1, cfg).unwrap().name_procedures(NAMES);
        let site = |n: u32, name: &str| format!("{uri}: {name} (program 0x20004c4c version 1, procedure {n})");

        let e = bytes(REFUSE, &client, b"abc").unwrap_err();
        let reason = if onc { None } else { Some(refusal(3)) };
        assert!(matches!(&e, Error::ServerError { message, .. } if *message == reason), "{e}");
        match &reason {
            Some(r) => assert_eq!(e.to_string(), format!("{} failed on the server: {r}", site(REFUSE, "REFUSE"))),
            None => assert_eq!(e.to_string(), format!("{} failed on the server", site(REFUSE, "REFUSE"))),
        }
        assert!(e.may_have_executed(), "it ran, and failed");

        let e = bytes(RAMBLE, &client, &[]).unwrap_err();
        match &e {
            Error::ServerError { message: Some(m), .. } => {
                assert_eq!(m.len(), lowlat::MAX_ERROR_MESSAGE, "cut to what a frame carries");
                assert!(m.chars().all(|c| c == 'é'), "cut between characters");
            }
            Error::ServerError { message: None, .. } => assert!(onc, "{e}"),
            _ => panic!("{e}"),
        }

        // Every kind of call error names the endpoint and the procedure.
        let failed = |r: Result<Vec<u8>, Error>| r.expect_err("the call failed");
        let mut errors = vec![
            (REFUSE, failed(bytes(REFUSE, &client, &[]))),
            (MINUS, failed(bytes(MINUS, &client, &[1, 2, 3]))),
            (99, failed(bytes(99, &client, &[]))),
            (4, failed(Lab::new(&client).echo(&vec![0; (64 << 10) + 1]))),
        ];
        let quick = lowlat::CallOptions::new().deadline(Duration::from_millis(50));
        let e = client.call_with(DROWSY, &quick, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(())).unwrap_err();
        // The time it took, rounded to three digits: `50.3 ms`, never `50.312345ms`.
        let shown = e.to_string();
        let after = shown.split(" timed out after ").nth(1).expect("says how long it waited");
        let (value, unit) = after.split_once(' ').unwrap();
        assert!(value.len() <= 4 && unit.starts_with("ms: "), "{shown}");
        errors.push((DROWSY, e));
        for (n, e) in errors {
            let name = NAMES.iter().find(|(k, _)| *k == n).map(|(_, name)| *name);
            let want = match name {
                Some(name) => site(n, name),
                None => format!("{uri}: procedure {n} of program 0x20004c4c version 1"),
            };
            assert!(e.to_string().starts_with(&want), "{e}\n does not start with {want}");
            let call = e.call().expect("a call's error says which call");
            assert_eq!((&*call.uri, call.proc_no, call.name.as_deref()), (uri.as_str(), n, name));
        }
    });
    server.shutdown();
}

/// An unknown procedure, program or version gets its own typed error (at bind or at the call),
/// as do arguments the procedure cannot decode; the binding that asked goes on working.
pub fn unknown_procedure_program_and_version(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    env.on_client(30, move || {
        let cfg = ClientConfig { bind_timeout: Duration::from_secs(2), ..ClientConfig::default() };
        let client = Client::connect_with(&uri, PROG, 1, cfg.clone()).unwrap();
        let e = bytes(99, &client, &[]).unwrap_err();
        assert!(
            matches!(&e, Error::UnknownProcedure { call } if (call.program, call.version, call.proc_no) == (PROG, 1, 99)),
            "{e}"
        );
        assert!(!e.may_have_executed(), "{e}");
        assert_eq!(Lab::new(&client).echo(b"still").unwrap(), b"still");
        let e = bytes(MINUS, &client, &[1, 2, 3]).unwrap_err();
        assert!(matches!(&e, Error::GarbageArgs { call, .. } if call.proc_no == MINUS), "{e}");
        assert_eq!(Lab::new(&client).minus(i32::MIN, 1).unwrap(), i32::MAX, "wraps like C");

        let first_call = |program: u32, version: u32| {
            Client::connect_with(&uri, program, version, cfg.clone()).and_then(|c| bytes(0, &c, &[]))
        };
        let e = first_call(PROG + 1, 1).unwrap_err();
        assert!(matches!(&e, Error::UnknownProgram { program, .. } if *program == PROG + 1), "{e}");
        let e = first_call(PROG, 9).unwrap_err();
        assert!(matches!(e, Error::VersionMismatch { requested: 9, low: 1, high: 1, .. }), "{e}");
    });
    server.shutdown();
}

/// A message larger than the binding allows is refused before it is sent, and a result larger
/// than the server allows is refused by the server; neither runs anything twice or breaks the
/// binding.
pub fn oversized_messages_are_refused(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let max = 64 << 10;
    let (server, uri) = env.serve(ServerConfig { max_message: max, ..ServerConfig::default() });
    let env_enc = env.encoding();
    env.on_client(30, move || {
        let cfg = ClientConfig { max_message: max, ..ClientConfig::default() };
        let client = Client::connect_with(&uri, PROG, 1, cfg).unwrap();
        assert!(client.max_message() <= max, "the binding's largest message is {}", client.max_message());
        let lab = Lab::new(&client);
        let e = lab.echo(&vec![1u8; max + 1]).unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
        assert!(!e.may_have_executed(), "{e}");
        assert_eq!(lab.echo(b"after").unwrap(), b"after");
        let fits = client.max_message() - env_enc.opaque_len(0) - if client.is_onc() { 64 } else { 0 };
        lab.maxarg(&vec![2u8; fits]).unwrap();
        if !client.is_onc() {
            // ONC RPC has no way to say how large a result may be: only lowlat's server refuses.
            let e = lab.maxresult(max as u32 + 1).unwrap_err();
            assert!(matches!(e, Error::TooLarge { .. }), "{e}");
            assert_eq!(lab.echo(b"after").unwrap(), b"after");
        }
    });
    server.shutdown();
}

/// Set in the environment of the process [`steady_state_calls_do_not_allocate`] runs itself in.
const ALLOC_CHILD: &str = "LOWLAT_CONFORMANCE_ALLOC_CHILD";

/// Steady-state calls allocate nothing on the client or the server (both in this process, so one
/// counting allocator sees both), busy-polling and blocking.
///
/// The allocator counts every thread of the process, the test harness's too (each test thread it
/// starts allocates), so the test runs itself in a process of its own: this test binary, asked
/// for `test` alone, on one test thread.
pub fn steady_state_calls_do_not_allocate(
    t: &'static Transport,
    test: &str,
    alloc: &'static lowlat_testkit::CountingAlloc,
) {
    if std::env::var_os(ALLOC_CHILD).is_none() {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--test-threads=1", "--nocapture"])
            .env(ALLOC_CHILD, "1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = join(std::thread::spawn(move || child.wait_with_output()), 120, &format!("test process {pid}"));
        let out = out.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{test} in its own process: {}\n{stdout}", out.status);
        assert!(stdout.contains("1 passed"), "{test} did not run in its own process:\n{stdout}");
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let (v, n) = alloc.count(|| std::hint::black_box(vec![1u8; 64]));
    drop(v);
    assert!(n >= 1, "the counter counts");
    for spin in [SpinPolicy::Forever, SpinPolicy::Block] {
        // A small duplicate-request cache (ONC RPC over UDP) fills during the warm-up and
        // recycles its buffers from then on.
        let (server, uri) = env.serve(ServerConfig { spin, onc_drc_entries: 64, ..ServerConfig::default() });
        let enc = env.encoding();
        let n = env.on_client(60, move || {
            let client = Client::connect_with(&uri, PROG, 1, ClientConfig { spin, ..ClientConfig::default() }).unwrap();
            let mut arg = Vec::new();
            enc.put_opaque(&[7u8; 1440], &mut arg);
            let mut out = Vec::with_capacity(4096);
            let rounds = |n: usize, out: &mut Vec<u8>| {
                for _ in 0..n {
                    for (proc_no, a) in [(0, &[][..]), (2, &arg[..]), (4, &arg[..])] {
                        client
                            .call::<_, lowlat::DecodeError>(
                                proc_no,
                                |b| {
                                    b.extend_from_slice(a);
                                    Ok(())
                                },
                                |r| {
                                    out.clear();
                                    out.extend_from_slice(r);
                                    Ok(())
                                },
                            )
                            .unwrap();
                    }
                }
            };
            rounds(200, &mut out); // warm up: buffers grow to the sizes in use
            alloc.count(|| rounds(1000, &mut out)).1
        });
        assert_eq!(n, 0, "{} {spin}: {n} allocations in 3000 steady-state calls", t.scheme);
        server.shutdown();
    }
}

/// Instantiates the suite for one transport: `conformance!(name, Transport { .. });`
#[macro_export]
macro_rules! conformance {
    ($name:ident, $transport:expr) => {
        mod $name {
            use super::*;
            static T: suite::Transport = $transport;
            #[test]
            fn lab_procedures_at_edge_sizes() {
                suite::lab_procedures_at_edge_sizes(&T)
            }
            #[test]
            fn deadline_holds_in_every_waiting_mode() {
                suite::deadline_holds_in_every_waiting_mode(&T)
            }
            #[test]
            fn long_running_procedures_do_not_hold_up_others() {
                suite::long_running_procedures_do_not_hold_up_others(&T)
            }
            #[test]
            fn long_running_marked_at_run_time() {
                suite::long_running_marked_at_run_time(&T)
            }
            #[test]
            fn errors_carry_the_reason_and_name_the_call() {
                suite::errors_carry_the_reason_and_name_the_call(&T)
            }
            #[test]
            fn graceful_stop_with_calls_in_flight() {
                suite::graceful_stop_with_calls_in_flight(&T)
            }
            #[test]
            fn shedding_load_runs_no_call_until_told_to_run_them() {
                suite::shedding_load_runs_no_call_until_told_to_run_them(&T)
            }
            #[test]
            fn unknown_procedure_program_and_version() {
                suite::unknown_procedure_program_and_version(&T)
            }
            #[test]
            fn oversized_messages_are_refused() {
                suite::oversized_messages_are_refused(&T)
            }
            #[test]
            fn server_not_running_is_said_at_once() {
                suite::server_not_running_is_said_at_once(&T)
            }
            #[test]
            fn server_shut_down_during_calls() {
                suite::server_shut_down_during_calls(&T)
            }
            #[test]
            fn restarted_server_is_used_by_the_same_client() {
                suite::restarted_server_is_used_by_the_same_client(&T)
            }
            #[test]
            fn killed_server_restarted_on_the_same_address() {
                let test = concat!(stringify!($name), "::killed_server_restarted_on_the_same_address");
                suite::killed_server_restarted_on_the_same_address(&T, test)
            }
            #[test]
            fn killed_clients_leave_nothing_behind() {
                let test = concat!(stringify!($name), "::killed_clients_leave_nothing_behind");
                suite::killed_clients_leave_nothing_behind(&T, test)
            }
            #[test]
            fn a_forgotten_session_is_bound_again_and_the_call_sent_whole() {
                suite::a_forgotten_session_is_bound_again_and_the_call_sent_whole(&T)
            }
            #[test]
            fn keyed_bindings_work_and_key_mismatches_are_reported() {
                suite::keyed_bindings_work_and_key_mismatches_are_reported(&T)
            }
            #[test]
            fn steady_state_calls_do_not_allocate() {
                let test = concat!(stringify!($name), "::steady_state_calls_do_not_allocate");
                suite::steady_state_calls_do_not_allocate(&T, test, &super::ALLOC)
            }
        }
    };
}
