//! A reply its result ring has no room for is kept and written as the client reads: the serving
//! thread serves the other connections meanwhile, sleeping or spinning, pushed or pulled; the
//! reply arrives whole; a client that frees no room for the stall limit loses its connection,
//! and only it. What a serving thread keeps for its connections (replies, and the buffers
//! large requests were assembled in) stays within its budgets.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use lowlat_shm::{Activity, ChannelConfig, ShmChannel, ShmServer, ShmServerConfig};
use lowlat_wait::SpinPolicy;

/// Larger than the 64 KiB result ring: streamed, most of it kept while the client does not read.
const LARGE: usize = 300_000;

fn large() -> Vec<u8> {
    (0..LARGE).map(|i| (i * 7 % 251) as u8).collect()
}

fn soon(t: Duration) -> Instant {
    Instant::now() + t
}

/// A serving thread driven as the runtime drives it (`serve_next`, then `block` when idle).
struct Pulled {
    stop: Arc<AtomicBool>,
    closed: Arc<AtomicUsize>,
    /// The most reply bytes the server kept at once (`ShmServer::kept_bytes`).
    most_kept: Arc<AtomicUsize>,
    /// The most bytes of reassembly buffers it kept at once, and the last count
    /// (`ShmServer::grown_bytes`).
    most_grown: Arc<AtomicUsize>,
    grown: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Pulled {
    fn start(path: &Path, config: ShmServerConfig) -> Pulled {
        let mut s = ShmServer::bind(path, config).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicUsize::new(0));
        let most_kept = Arc::new(AtomicUsize::new(0));
        let (most_grown, grown) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (st, cl, mk, mg, g) = (stop.clone(), closed.clone(), most_kept.clone(), most_grown.clone(), grown.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                mk.fetch_max(s.kept_bytes(), Ordering::Relaxed);
                mg.fetch_max(s.grown_bytes(), Ordering::Relaxed);
                g.store(s.grown_bytes(), Ordering::SeqCst);
                match s.serve_next(|_, request, reply| {
                    let _ = reply.send(&[request]);
                }) {
                    Some(Activity::Closed(_)) => {
                        cl.fetch_add(1, Ordering::SeqCst);
                    }
                    Some(Activity::Request(..)) => {}
                    None => s.block(Some(Duration::from_secs(1))).unwrap(),
                }
            }
        });
        Pulled { stop, closed, most_kept, most_grown, grown, thread: Some(thread) }
    }
}

impl Drop for Pulled {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let joined = t.join();
            if !std::thread::panicking() {
                joined.expect("server thread panicked");
            }
        }
    }
}

/// The server driven either way.
enum Server {
    Pulled(Pulled),
    Pushed(EchoServer),
}

impl Server {
    fn start(path: &Path, pulled: bool, config: ShmServerConfig) -> Server {
        if pulled {
            Server::Pulled(Pulled::start(path, config))
        } else {
            Server::Pushed(EchoServer::start(path, config))
        }
    }

    /// Connections it closed so far.
    fn closed(&self) -> usize {
        match self {
            Server::Pulled(s) => s.closed.load(Ordering::SeqCst),
            Server::Pushed(s) => s.counters.closed.load(Ordering::SeqCst),
        }
    }
}

/// Every way of driving the server, under every spin policy.
fn each_server(test: impl Fn(&str, &Path, bool, SpinPolicy)) {
    for pulled in [true, false] {
        for spin in [SpinPolicy::Block, SpinPolicy::Adaptive, SpinPolicy::Forever] {
            let dir = Scratch::new("backlog");
            let how = format!("{}, {spin:?}", if pulled { "pulled" } else { "pushed" });
            test(&how, &dir.path("s"), pulled, spin);
        }
    }
}

fn connect(path: &Path) -> ShmChannel {
    ShmChannel::connect(path, ChannelConfig::default()).unwrap()
}

#[test]
fn a_client_leaving_a_large_result_unread_holds_up_no_other() {
    each_server(|how, path, pulled, spin| {
        // Before, the serving thread waited for room in the slow client's ring, up to this.
        let stall_limit = Duration::from_secs(5);
        let server = Server::start(path, pulled, ShmServerConfig { spin, stall_limit, ..ShmServerConfig::default() });
        let big = large();
        let mut slow = connect(path);
        slow.send(&[&big], soon(Duration::from_secs(5))).unwrap();
        // The server takes the call and writes what fits of its result.
        std::thread::sleep(Duration::from_millis(50));

        let mut quick = connect(path);
        let mut worst = Duration::ZERO;
        for i in 0..200u32 {
            let msg = i.to_le_bytes();
            let t = Instant::now();
            let answer = quick.call(&[&msg], soon(Duration::from_secs(10))).unwrap();
            assert_eq!(answer, msg, "{how}");
            worst = worst.max(t.elapsed());
        }
        assert!(worst < Duration::from_secs(1), "{how}: a call on another connection waited {worst:?}");

        // Read now, the result arrives whole, and the connection serves on.
        let t = Instant::now();
        let got = slow.recv(soon(Duration::from_secs(10))).unwrap();
        assert!(got == big, "{how}: the large result arrived changed ({} bytes)", got.len());
        assert!(t.elapsed() < Duration::from_millis(500), "{how}: the large result took {:?}", t.elapsed());
        assert_eq!(slow.call(&[b"after"], soon(Duration::from_secs(5))).unwrap(), b"after", "{how}");
        assert_eq!(server.closed(), 0, "{how}");
    });
}

#[test]
fn a_client_freeing_no_room_for_the_stall_limit_loses_only_its_connection() {
    each_server(|how, path, pulled, spin| {
        let stall_limit = Duration::from_millis(200);
        let server = Server::start(path, pulled, ShmServerConfig { spin, stall_limit, ..ShmServerConfig::default() });
        let mut quick = connect(path);
        assert_eq!(quick.call(&[b"before"], soon(Duration::from_secs(5))).unwrap(), b"before", "{how}");
        let mut hoarder = connect(path);
        hoarder.send(&[&large()], soon(Duration::from_secs(5))).unwrap();
        let t = Instant::now();
        // Closed after the stall limit, even by a server with nothing else to do (asleep).
        while server.closed() == 0 {
            assert!(t.elapsed() < Duration::from_secs(5), "{how}: the hoarder was never disconnected");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(t.elapsed() >= stall_limit / 2, "{how}: disconnected after {:?}", t.elapsed());
        // Its result never comes whole: an error, not a hang.
        assert!(hoarder.recv(soon(Duration::from_secs(2))).is_err(), "{how}");
        assert_eq!(quick.call(&[b"after"], soon(Duration::from_secs(5))).unwrap(), b"after", "{how}");
        assert_eq!(server.closed(), 1, "{how}");
    });
}

#[test]
fn a_serving_thread_keeps_no_more_than_its_budget() {
    let dir = Scratch::new("budget");
    let path = dir.path("s");
    // Room for one large result, not two: the second waits for room where it is.
    let max_kept = LARGE + LARGE / 2;
    let stall_limit = Duration::from_millis(300);
    let server = Pulled::start(&path, ShmServerConfig { stall_limit, max_kept, ..ShmServerConfig::default() });
    let hoarders: Vec<_> = (0..4)
        .map(|_| {
            let mut h = connect(&path);
            h.send(&[&large()], soon(Duration::from_secs(10))).unwrap();
            h
        })
        .collect();
    let t = Instant::now();
    while server.closed.load(Ordering::SeqCst) < hoarders.len() {
        assert!(t.elapsed() < Duration::from_secs(10), "the hoarders were not all disconnected");
        std::thread::sleep(Duration::from_millis(1));
    }
    let most = server.most_kept.load(Ordering::Relaxed);
    assert!(most > 0 && most <= max_kept, "kept {most} bytes at once, the budget {max_kept}");
    // The budget is whole again: an honest client's large result is kept and arrives whole.
    let mut honest = connect(&path);
    let big = large();
    assert!(honest.call(&[&big], soon(Duration::from_secs(5))).unwrap() == big);
}

#[test]
fn buffers_grown_for_large_requests_are_kept_within_the_budget() {
    let dir = Scratch::new("grown");
    let path = dir.path("s");
    // Room for one large request's buffer (grown by doubling: ~500 KB for 300 KB), not two.
    let max_grown = 2 * LARGE;
    let server = Pulled::start(&path, ShmServerConfig { max_grown, ..ShmServerConfig::default() });
    let big = large();
    let mut clients: Vec<_> = (0..4).map(|_| connect(&path)).collect();
    for round in 0..2 {
        for c in &mut clients {
            assert!(c.call(&[&big], soon(Duration::from_secs(5))).unwrap() == big, "round {round}");
        }
    }
    let most = server.most_grown.load(Ordering::Relaxed);
    assert!(most >= LARGE && most <= max_grown, "kept {most} bytes at once, the budget {max_grown}");
    // The first client's buffer is kept for its next large request; the others gave theirs
    // back. When it goes, so does what it kept.
    assert!(server.grown.load(Ordering::SeqCst) >= LARGE);
    drop(clients.remove(0));
    let t = Instant::now();
    while server.grown.load(Ordering::SeqCst) != 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "{} bytes still counted", server.grown.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(1));
    }
}
