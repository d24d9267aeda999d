//! Pipelined ping-pong ([`lowlat_lab::pingpong::run_pipelined`]) against echo servers run in
//! this process: every exchange asked is answered and checked at W = 1, 4 and 64 over the
//! shared-memory and udp floors and lowlat's own shm, udp and tcp; a lost datagram is counted,
//! not waited for; a server that stops answering fails the run within its timeout.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lowlat::SpinPolicy;
use lowlat_lab::pingpong::{run_pipelined, PingPongError, PingPongServer, PipelineOptions, Throughput};

/// Exchanges per run: enough to wrap the largest ring many times, few enough for slow CI cores
/// (where a spinning client and a spinning server in one process hand over at the scheduler's
/// pace: 3,000 took up to 18 s with other builds running).
const EXCHANGES: u64 = 600;

/// Stops an echo server however the test ends, so that a failed assertion is reported instead
/// of leaving the scope waiting for the server for ever.
struct StopOnDrop<'a>(&'a AtomicBool);
impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn opts(floor: bool) -> PipelineOptions {
    PipelineOptions { floor, warmup: 100, timeout: Duration::from_secs(5), ..Default::default() }
}

/// Runs `f` against `server`, serving on a thread until `f` returns.
fn against<T>(server: PingPongServer, f: impl FnOnce(&str) -> T) -> T {
    let uri = server.local_uri.clone();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let echo = s.spawn(|| server.run(&stop));
        let stopping = StopOnDrop(&stop);
        let out = f(&uri);
        drop(stopping);
        echo.join().unwrap().unwrap();
        out
    })
}

/// An shm address in `dir`.
fn shm_in(dir: &tempfile::TempDir) -> String {
    format!("shm://{}", dir.path().join("s").display())
}

fn check(t: &Throughput, w: usize) {
    assert_eq!(t.exchanges, EXCHANGES, "{t}");
    assert_eq!(t.in_flight, w);
    assert!(t.exchanges_per_s() > 0.0 && t.client_cpu > Duration::ZERO, "{t}");
    assert!(t.server_cpu.is_some(), "the server reports its CPU: {t}");
}

/// Every window over every exchange: the server lives across the windows, so a client that
/// left a message behind, or took an echo twice, would break the next window's matching.
fn every_window(server: PingPongServer, floor: bool, size: usize) {
    against(server, |uri| {
        for w in [1, 4, 64] {
            let t = run_pipelined(uri, size, EXCHANGES, w, opts(floor)).unwrap_or_else(|e| panic!("{uri} W={w}: {e}"));
            check(&t, w);
            if !uri.starts_with("udp") {
                assert_eq!((t.lost, t.late), (0, 0), "{t}");
            }
        }
    });
}

#[test]
fn the_shm_floor_completes_every_window() {
    let dir = tempfile::tempdir().unwrap();
    let server = PingPongServer::bind_floor(&shm_in(&dir), SpinPolicy::Forever).unwrap();
    every_window(server, true, 32);
}

#[test]
fn the_udp_floor_completes_every_window() {
    // The server sleeps when idle: the test is of the exchange, not of its speed.
    let server = PingPongServer::bind_floor("udp://127.0.0.1:0", SpinPolicy::Block).unwrap();
    every_window(server, true, 32);
}

#[test]
fn lowlat_transports_complete_every_window() {
    let dir = tempfile::tempdir().unwrap();
    for listen in [shm_in(&dir), "udp://127.0.0.1:0".into(), "tcp://127.0.0.1:0".into()] {
        // The server sleeps when idle: the test is of the exchange, not of its speed.
        let server = PingPongServer::bind(&listen, SpinPolicy::Block, true, None).unwrap();
        every_window(server, false, 32);
    }
}

#[test]
fn a_shm_floor_record_of_every_size_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = PingPongServer::bind_floor(&shm_in(&dir), SpinPolicy::Forever).unwrap();
    against(server, |uri| {
        // Fewer exchanges: every size wraps the ring of 16 still, and spinning threads on
        // oversubscribed CI cores hand over at the scheduler's pace.
        for size in [8, 16, 64] {
            let t = run_pipelined(uri, size, 300, 16, opts(true)).unwrap();
            assert_eq!((t.exchanges, t.lost), (300, 0), "{t}");
        }
        assert!(matches!(run_pipelined(uri, 72, 10, 16, opts(true)), Err(PingPongError::Size { .. })));
    });
}

/// An echo server that drops the datagrams whose sequence number `drop` says, and echoes the
/// rest (twice, with `twice`), until `stop`.
fn faulty_udp_echo(sock: &UdpSocket, stop: &AtomicBool, drop: impl Fn(u64) -> bool, twice: impl Fn(u64) -> bool) {
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        let seq = u64::from_le_bytes(buf[..8].try_into().unwrap());
        if n == 8 || !drop(seq) {
            // Reports (8 bytes) are echoed unanswered: this server does not report its CPU.
            sock.send_to(&buf[..n], from).unwrap();
            if n > 8 && twice(seq) {
                sock.send_to(&buf[..n], from).unwrap();
            }
        }
    }
}

#[test]
fn a_lost_datagram_is_counted_not_waited_for() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let uri = format!("udp://{}", sock.local_addr().unwrap());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| faulty_udp_echo(&sock, &stop, |seq| seq == 150 || seq == 1000, |_| false));
        let stopping = StopOnDrop(&stop);
        let o = PipelineOptions { loss_timeout: Duration::from_millis(20), ..opts(false) };
        let start = Instant::now();
        let t = run_pipelined(&uri, 32, EXCHANGES, 8, o).unwrap();
        assert!(start.elapsed() < Duration::from_secs(3), "bounded: {:?}", start.elapsed());
        assert_eq!(t.exchanges, EXCHANGES, "{t}");
        assert!(t.lost >= 1, "the dropped datagram is counted: {t}");
        assert_eq!(t.server_cpu, None, "a server that echoes the question does not report");
        drop(stopping);
    });
}

#[test]
fn a_duplicated_echo_fails_the_run() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let uri = format!("udp://{}", sock.local_addr().unwrap());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| faulty_udp_echo(&sock, &stop, |_| false, |seq| seq == 500));
        let stopping = StopOnDrop(&stop);
        // W = 64: the duplicate arrives while its message is still in the window.
        let e = run_pipelined(&uri, 32, EXCHANGES, 64, opts(true)).unwrap_err();
        assert!(matches!(e, PingPongError::Mismatch(_)), "{e}");
        drop(stopping);
    });
}

#[test]
fn a_silent_server_fails_the_run_in_bounded_time() {
    // Bound, never answering: every window is given up, then the run times out.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let uri = format!("udp://{}", sock.local_addr().unwrap());
    let o =
        PipelineOptions { timeout: Duration::from_millis(300), loss_timeout: Duration::from_millis(20), ..opts(true) };
    let start = Instant::now();
    let e = run_pipelined(&uri, 32, 100, 4, o).unwrap_err();
    assert!(matches!(e, PingPongError::Timeout(_)), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    drop(sock);
}
