//! The transport conformance suite: every test written once, against a [`Transport`] (a scheme,
//! where its servers listen and its clients call, and what it can do), and instantiated for every
//! scheme by one line of [`conformance!`] in `tests/conformance.rs`.
//!
//! Transports that need root run their servers in one network namespace and their clients in
//! another, joined by a veth pair the test creates and removes (`lowlat_eth::testhosts`); they are
//! skipped, with the reason printed, when the tests do not run as root.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Execution, KeyMismatch, Program, Psk, Server, ServerConfig, SpinPolicy};
use lowlat_eth::testhosts::{self, TestHosts};

use crate::common::{bytes, lab_program_in, Encoding, Lab, MINUS, PROG};

/// Echoes its argument from the worker pool after `SLOW_FOR`: a long-running procedure.
pub const SLOW_ECHO: u32 = 5;
pub const SLOW_FOR: Duration = Duration::from_millis(300);
/// Sleeps `DROWSY_FOR` on the worker pool, then answers nothing: a call that outlives any
/// deadline the tests set.
pub const DROWSY: u32 = 6;
pub const DROWSY_FOR: Duration = Duration::from_millis(400);

/// A transport as the suite sees it.
pub struct Transport {
    pub scheme: &'static str,
    /// Where a server listens. `{dir}` is a fresh directory; `{a}` the server host's interface.
    pub listen: &'static str,
    /// Where a client calls; `None`: the URI the server reports. `{b}` is the client host's
    /// interface, `{a.mac}` the server host's MAC address.
    pub client: Option<&'static str>,
    pub caps: Caps,
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
        let server = self.serve_at(&self.listen_uri(), cfg).expect("serving");
        let uri = match self.t.client {
            Some(c) => self.expand(c),
            None => server.local_uris()[0].clone(),
        };
        (server, uri)
    }

    /// Serves [`program`](Self::program) at `uri` (on the server's host).
    pub fn serve_at(&self, uri: &str, cfg: ServerConfig) -> Result<Server, Error> {
        let program = self.program();
        let uri = uri.to_string();
        // Servers answer ONC RPC callers only as the test asks: never register with rpcbind.
        let cfg = ServerConfig { onc_register: false, ..cfg };
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

/// An unknown procedure, program or version gets its own typed error (at bind or at the call),
/// as do arguments the procedure cannot decode; the binding that asked goes on working.
pub fn unknown_procedure_program_and_version(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    env.on_client(30, move || {
        let cfg = ClientConfig { bind_timeout: Duration::from_secs(2), ..ClientConfig::default() };
        let client = Client::connect_with(&uri, PROG, 1, cfg.clone()).unwrap();
        let e = bytes(99, &client, &[]).unwrap_err();
        assert!(matches!(e, Error::UnknownProcedure { program: PROG, version: 1, proc_no: 99 }), "{e}");
        assert!(!e.may_have_executed(), "{e}");
        assert_eq!(Lab::new(&client).echo(b"still").unwrap(), b"still");
        let e = bytes(MINUS, &client, &[1, 2, 3]).unwrap_err();
        assert!(matches!(e, Error::GarbageArgs { proc_no: MINUS }), "{e}");
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

/// Where no server listens, binding (or, over ONC RPC over UDP, the first call) fails with
/// `ServerNotRunning` at once (on a silent transport, `BindTimeout` once its timeout passes), and
/// the call is known not to have executed.
pub fn server_not_running_is_said_at_once(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let uri = env.nobody_uri();
    env.on_client(10, move || {
        let bind_timeout = Duration::from_millis(500);
        let cfg = ClientConfig { bind_timeout, ..ClientConfig::default() };
        let begun = Instant::now();
        let e = Client::connect_with(&uri, PROG, 1, cfg).and_then(|c| bytes(0, &c, &[])).unwrap_err();
        let took = begun.elapsed();
        if t.caps.silent {
            assert!(matches!(e, Error::BindTimeout { .. }), "{e}");
            assert!(took >= bind_timeout && took < bind_timeout * 2, "{uri}: took {took:?}");
        } else {
            assert!(matches!(e, Error::ServerNotRunning { .. }), "{e}");
            assert!(took < bind_timeout, "{uri}: took {took:?}");
        }
        assert!(!e.may_have_executed(), "{e}");
    });
}

/// Whether `e` is one of the errors a call may end with when its server goes away.
fn is_server_gone(e: &Error) -> bool {
    matches!(
        e,
        Error::ConnectionLost { .. }
            | Error::ServerNotRunning { .. }
            | Error::Timeout { .. }
            | Error::SessionLost { .. }
            | Error::ServerRestarted { .. }
            | Error::BindTimeout { .. }
    )
}

/// A server shut down while threads are calling: every call either completes correctly or fails
/// with a typed error within its deadline; nothing hangs or panics.
pub fn server_shut_down_during_calls(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let callers = env.on_client(10, move || {
        let cfg = ClientConfig {
            deadline: Duration::from_secs(2),
            bind_timeout: Duration::from_millis(500),
            ..ClientConfig::default()
        };
        let client = Arc::new(Client::connect_with(&uri, PROG, 1, cfg).unwrap());
        (0..3u8)
            .map(|i| {
                let c = client.clone();
                std::thread::spawn(move || {
                    let lab = Lab::new(&c);
                    let (mut ok, mut failed) = (0u32, 0u32);
                    let end = Instant::now() + Duration::from_secs(8);
                    while failed < 3 && Instant::now() < end {
                        let msg = [i; 100];
                        match lab.echo(&msg) {
                            Ok(r) => {
                                assert_eq!(r, msg);
                                ok += 1;
                            }
                            Err(e) => {
                                assert!(is_server_gone(&e), "{e}");
                                failed += 1;
                            }
                        }
                    }
                    (ok, failed)
                })
            })
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(50));
    server.shutdown();
    for h in callers {
        let (ok, failed) = join(h, 20, "a calling thread");
        assert!(ok > 0, "the thread called before the shutdown");
        assert_eq!(failed, 3, "every thread sees the server gone within its deadlines");
    }
}

/// A server restarted on the same address is used by the same client: the calls sent while it
/// was down fail with typed errors, and within a few calls after its return the client has
/// bound again and is served.
pub fn restarted_server_is_used_by_the_same_client(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let listen = if t.client.is_some() { env.listen_uri() } else { uri.clone() };
    let cfg = ClientConfig {
        deadline: Duration::from_secs(1),
        bind_timeout: Duration::from_millis(500),
        ..ClientConfig::default()
    };
    let client = Arc::new(env.on_client(10, move || Client::connect_with(&uri, PROG, 1, cfg).unwrap()));
    let call = || {
        let c = client.clone();
        env.on_client(10, move || Lab::new(&c).echo(b"are you there"))
    };
    let mut server = Some(server);
    for round in 0..3 {
        assert_eq!(call().unwrap(), b"are you there", "round {round}");
        server.take().expect("serving").shutdown();
        let e = call().unwrap_err();
        assert!(is_server_gone(&e), "round {round}, server down: {e}");
        server = Some(env.serve_at(&listen, ServerConfig::default()).expect("serving again on the same address"));
        let begun = Instant::now();
        let mut errors = Vec::new();
        let answer = loop {
            match call() {
                Ok(r) => break r,
                Err(e) => {
                    assert!(is_server_gone(&e), "round {round}, server back: {e}");
                    errors.push(e.to_string());
                    assert!(errors.len() < 3, "round {round}: not served again: {errors:?}");
                }
            }
        };
        assert_eq!(answer, b"are you there");
        assert!(begun.elapsed() < Duration::from_secs(3), "round {round}: {:?}", begun.elapsed());
        for _ in 0..20 {
            assert_eq!(call().unwrap(), b"are you there", "round {round}");
        }
    }
    server.expect("serving").shutdown();
}

/// A pre-shared key of the suite's (`n` picks one of several).
fn psk(n: u8) -> Psk {
    Psk::new(&[n; 32]).unwrap()
}

/// With a pre-shared key, every lab procedure works at the edge sizes (frames tagged both ways,
/// multi-fragment messages included) and the counters show not one tag failed; a client without
/// the key, with another, or with one where the server has none is refused at once with the
/// typed error that says which. Over shm:// keys are not used (the rings are private to two
/// processes whose credentials the server checked): every client binds. ONC RPC takes no key.
pub fn keyed_bindings_work_and_key_mismatches_are_refused_at_once(t: &'static Transport) {
    if t.caps.xdr {
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig { psk: Some(psk(1)), ..ServerConfig::default() });
    let private = t.scheme == "shm";
    let u = uri.clone();
    env.on_client(60, move || {
        let cfg = |key: Option<Psk>| ClientConfig {
            psk: key,
            bind_timeout: Duration::from_secs(2),
            ..ClientConfig::default()
        };
        let client = Client::connect_with(&u, PROG, 1, cfg(Some(psk(1)))).unwrap();
        assert_eq!(client.session().keyed, !private, "whether frames carry tags");
        let frame = one_frame(&client, Encoding::Native);
        let mut sizes = vec![0, 1, frame - 1, frame, frame + 1, 100_000];
        sizes.retain(|&n| n <= client.max_message());
        Lab::new(&client).check(1, &sizes);
        assert_eq!(client.stats().mac_failures, 0);
        for (key, want) in [(None, KeyMismatch::ServerRequiresKey), (Some(psk(2)), KeyMismatch::KeysDiffer)] {
            let begun = Instant::now();
            let got = Client::connect_with(&u, PROG, 1, cfg(key));
            if private {
                assert!(got.is_ok(), "shm binds whatever the key: {:?}", got.err());
                continue;
            }
            let e = got.unwrap_err();
            assert!(matches!(&e, Error::KeyMismatch { reason, .. } if *reason == want), "{e}");
            assert!(begun.elapsed() < Duration::from_secs(1), "refused at once, not after a timeout: {e}");
            assert!(!e.may_have_executed());
        }
    });
    let stats = &server.stats()[0].1;
    assert_eq!(stats.mac_failures, 0, "{stats:?}");
    if !private {
        assert_eq!((stats.refused_key_required, stats.refused_bad_key), (1, 1), "{stats:?}");
    }
    server.shutdown();
    let (open, uri) = env.serve(ServerConfig::default());
    env.on_client(10, move || {
        let cfg = ClientConfig { psk: Some(psk(1)), ..ClientConfig::default() };
        match Client::connect_with(&uri, PROG, 1, cfg) {
            Ok(c) => assert!(private && !c.session().keyed),
            Err(e) => assert!(matches!(e, Error::KeyMismatch { reason: KeyMismatch::ServerHasNoKey, .. }), "{e}"),
        }
    });
    open.shutdown();
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
            fn keyed_bindings_work_and_key_mismatches_are_refused_at_once() {
                suite::keyed_bindings_work_and_key_mismatches_are_refused_at_once(&T)
            }
            #[test]
            fn steady_state_calls_do_not_allocate() {
                let test = concat!(stringify!($name), "::steady_state_calls_do_not_allocate");
                suite::steady_state_calls_do_not_allocate(&T, test, &super::ALLOC)
            }
        }
    };
}
