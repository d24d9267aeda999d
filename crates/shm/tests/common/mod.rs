//! Helpers shared by the shm integration tests: scratch directories, an echo server on a thread,
//! and child processes (the test binary re-executed to run one `#[ignore]`d entry point).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat_shm::{ConnectionId, PeerCred, Reply, ShmError, ShmHandler, ShmServer, ShmServerConfig};

/// A directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "llshm-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Counts of what the server thread saw.
#[derive(Default)]
pub struct Counters {
    pub opened: AtomicUsize,
    pub closed: AtomicUsize,
    pub refused: AtomicUsize,
    pub served: AtomicUsize,
    pub live: AtomicUsize,
}

pub struct Echo(pub Arc<Counters>);

impl ShmHandler for Echo {
    fn call(&mut self, _b: ConnectionId, request: &[u8], mut reply: Reply<'_>) {
        let n = self.0.served.fetch_add(1, Ordering::Relaxed);
        // Every other echo is built where the client reads it, so that every test meets both
        // ways of replying (hostile clients scribbling over the space lent among them).
        if n % 2 == 1 {
            let copy = |lent: &mut [u8]| {
                let dst = lent.get_mut(..request.len())?;
                dst.copy_from_slice(request);
                Some(request.len())
            };
            match reply.build_in_place(copy) {
                Ok(None) => {}                  // larger than the free space: sent below, streamed if need be
                Ok(Some(_)) | Err(_) => return, // sent, or the connection is broken and closed
            }
        }
        let _ = reply.send(&[request]);
    }
    fn opened(&mut self, _b: ConnectionId, _p: PeerCred) {
        self.0.opened.fetch_add(1, Ordering::SeqCst);
        self.0.live.fetch_add(1, Ordering::SeqCst);
    }
    fn closed(&mut self, _b: ConnectionId, _why: &ShmError) {
        self.0.closed.fetch_add(1, Ordering::SeqCst);
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
    fn refused(&mut self, _p: PeerCred) {
        self.0.refused.fetch_add(1, Ordering::SeqCst);
    }
}

/// An echo server running on its own thread until dropped.
pub struct EchoServer {
    pub counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    /// The serving thread; returns the connections the server closed as corrupt.
    thread: Option<JoinHandle<Result<u64, ShmError>>>,
}

impl EchoServer {
    pub fn start(path: &Path, config: ShmServerConfig) -> EchoServer {
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = ShmServer::bind(path, config).expect("bind");
        let (c, s) = (counters.clone(), stop.clone());
        let thread = std::thread::spawn(move || server.run(&mut Echo(c), &s).map(|()| server.corrupt_connections()));
        EchoServer { counters, stop, thread: Some(thread) }
    }

    /// Stops the server; returns how many connections it closed because their client broke the
    /// rings.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.take().expect("running");
        t.join().expect("server thread panicked").expect("server failed")
    }

    /// Waits (bounded) until `f` holds.
    pub fn wait_for(&self, what: &str, f: impl Fn(&Counters) -> bool) {
        let t = Instant::now();
        while !f(&self.counters) {
            assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let r = t.join().expect("server thread panicked");
            if !std::thread::panicking() {
                r.expect("server failed");
            }
        }
    }
}

pub const CHILD_ENV: &str = "LOWLAT_SHM_TEST_CHILD";

/// Starts this test binary again, running only `entry` (an `#[ignore]`d test) with `role` in
/// the environment.
pub fn child(entry: &str, role: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--ignored", "--exact", entry, "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

/// Kills a child by its PID (SIGKILL) and reaps it.
pub fn kill9(child: &mut Child) {
    // A child we spawned and have not reaped: its PID cannot be reused yet.
    let _ = lowlat_sys::kill(child.id());
    let _ = child.wait();
}

/// Children prefix what they report with this, to tell it from the test harness's own output.
pub const SAY: &str = "CHILD:";

/// Reads the child's first `SAY` line from its stdout with a bound on the wait (the rest of the
/// output is drained in the background).
pub fn read_line(child: &mut Child, within: Duration) -> String {
    use std::io::{BufRead, BufReader};
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(said) = line.strip_prefix(SAY) {
                let _ = tx.send(said.trim().to_string());
            }
        }
    });
    match rx.recv_timeout(within) {
        Ok(l) => l,
        Err(_) => {
            kill9(child);
            panic!("child said nothing within {within:?}");
        }
    }
}

/// Waits (bounded) for a socket file to appear.
pub fn wait_for_path(p: &Path) {
    let t = Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A small deterministic generator (xorshift64*), for bytes a hostile peer writes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

pub fn deadline(d: Duration) -> Instant {
    Instant::now() + d
}

/// The echo handler: the reply is the request, copied from one ring into the other.
pub fn echo(_: ConnectionId, request: &[u8], reply: Reply<'_>) {
    // A failed reply closes the connection; the server reports it through `ShmHandler::closed`.
    let _ = reply.send(&[request]);
}
