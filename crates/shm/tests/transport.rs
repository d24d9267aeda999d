//! Behaviour of a connection end to end: message sizes, the socket path rules, refusal, waiting.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use lowlat_shm::{ChannelConfig, Layout, PeerPolicy, ShmChannel, ShmError, ShmServer, ShmServerConfig, SpinPolicy};

const RING: usize = 4096;

fn small_rings() -> ShmServerConfig {
    ShmServerConfig {
        layout: Layout { call_ring: RING, result_ring: RING },
        // Generous: on a loaded machine a client thread can be off CPU for a while.
        stall_limit: Duration::from_secs(2),
        ..ShmServerConfig::default()
    }
}

#[test]
fn edge_sizes_echo_intact_from_many_threads() {
    let dir = Scratch::new("sizes");
    let path = dir.path("s");
    let server = EchoServer::start(&path, small_rings());
    let sizes = [0, 1, 7, 8, RING - 9, RING - 8, RING - 7, RING - 1, RING, RING + 1, 3 * RING + 5, 1 << 20];
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
                for round in 0..3u8 {
                    for &n in &sizes {
                        let msg = pattern(n, t.wrapping_mul(13).wrapping_add(round));
                        // Two parts, split unevenly, to exercise gathering across chunks; every
                        // other round through the two-piece send (one record written in place
                        // where it fits, the general path where it does not).
                        let (a, b) = msg.split_at(n / 3);
                        let got = if (round + t) % 2 == 0 {
                            ch.call(&[a, b], deadline(Duration::from_secs(5))).unwrap()
                        } else {
                            ch.send_two_within(a, b, Duration::from_secs(5)).unwrap();
                            ch.recv(deadline(Duration::from_secs(5))).unwrap()
                        };
                        assert!(got == &msg[..], "size {n}: echo differs (got {} bytes)", got.len());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(server.counters.served.load(Ordering::Relaxed), 4 * 3 * sizes.len());
}

#[test]
fn oversized_message_is_a_typed_error_and_the_binding_survives() {
    let dir = Scratch::new("big");
    let path = dir.path("s");
    let _server = EchoServer::start(&path, small_rings());
    let cfg = ChannelConfig { max_message: 10_000, ..ChannelConfig::default() };
    let mut ch = ShmChannel::connect(&path, cfg).unwrap();
    let big = vec![0u8; 10_001];
    let e = ch.send(&[&big], deadline(Duration::from_secs(1))).unwrap_err();
    assert!(matches!(e, ShmError::Ring(lowlat_shm::RingError::TooLarge { len: 10_001, max: 10_000 })), "{e}");
    let e = ch.send_two_within(&big[..32], &big[32..], Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, ShmError::Ring(lowlat_shm::RingError::TooLarge { len: 10_001, max: 10_000 })), "{e}");
    assert_eq!(ch.call(&[b"still fine"], deadline(Duration::from_secs(5))).unwrap(), b"still fine");
}

#[test]
fn recv_timeout_is_reported_and_not_fatal() {
    let dir = Scratch::new("tmo");
    let path = dir.path("s");
    let _server = EchoServer::start(&path, small_rings());
    let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
    let t = Instant::now();
    let e = ch.recv(deadline(Duration::from_millis(30))).unwrap_err();
    assert!(matches!(e, ShmError::Timeout { .. }), "{e}");
    assert!(t.elapsed() >= Duration::from_millis(30) && t.elapsed() < Duration::from_secs(2));
    assert_eq!(ch.call(&[b"x"], deadline(Duration::from_secs(5))).unwrap(), b"x");
}

#[test]
fn socket_path_rules() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Scratch::new("path");
    // A regular file is never clobbered.
    let file = dir.path("file");
    std::fs::write(&file, b"keep me").unwrap();
    let e = lowlat_shm::ShmServer::bind(&file, ShmServerConfig::default()).unwrap_err();
    assert!(matches!(e, ShmError::PathInUse { .. }), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // A live server's socket is not taken over.
    let path = dir.path("s");
    let live = lowlat_shm::ShmServer::bind(&path, ShmServerConfig::default()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let e = lowlat_shm::ShmServer::bind(&path, ShmServerConfig::default()).unwrap_err();
    assert!(matches!(e, ShmError::PathInUse { .. }), "{e}");
    drop(live);
    assert!(!path.exists(), "server removes its socket on drop");
    // A stale socket (nobody listening) is replaced; the configured mode applies.
    let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
    drop(stale); // the file stays, nobody listens
    assert!(path.exists());
    let cfg = ShmServerConfig { mode: 0o660, ..ShmServerConfig::default() };
    let _s = lowlat_shm::ShmServer::bind(&path, cfg).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o660);
}

#[test]
fn disallowed_uid_is_refused_by_policy() {
    let dir = Scratch::new("refuse");
    let path = dir.path("s");
    let me = lowlat_sys::effective_uid();
    let cfg = ShmServerConfig {
        policy: PeerPolicy { uids: vec![me.wrapping_add(4242)], gids: vec![] },
        ..ShmServerConfig::default()
    };
    let server = EchoServer::start(&path, cfg);
    let e = ShmChannel::connect(&path, ChannelConfig::default()).unwrap_err();
    match e {
        ShmError::Refused { uid, .. } => assert_eq!(uid, me),
        e => panic!("expected a refusal, got {e}"),
    }
    server.wait_for("refusal", |c| c.refused.load(Ordering::SeqCst) == 1);
    assert_eq!(server.counters.opened.load(Ordering::SeqCst), 0);
}

#[test]
fn another_uid_is_refused() {
    if lowlat_sys::effective_uid() != 0 {
        eprintln!("another_uid_is_refused: needs root to run a client as another user; skipped");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = Scratch::new("uid");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path("s");
    // The file mode lets the other user reach the socket: the refusal must come from the
    // credentials check, not from the file system.
    let server = EchoServer::start(&path, ShmServerConfig { mode: 0o666, ..ShmServerConfig::default() });
    let mut c = child("child_entry", &format!("connect:{}", path.display()));
    c.uid(65534).gid(65534);
    let mut ch = c.spawn().unwrap();
    let line = read_line(&mut ch, Duration::from_secs(20));
    kill9(&mut ch);
    assert_eq!(line, "refused uid=65534", "child reported: {line:?}");
    // The server counts the refusal just after sending it.
    server.wait_for("the refusal to be counted", |c| c.refused.load(Ordering::SeqCst) == 1);
}

/// Entry point for child processes (run by other tests, never on its own).
#[test]
#[ignore = "child process entry point for other tests"]
fn child_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    if let Some(p) = role.strip_prefix("connect:") {
        match ShmChannel::connect(p, ChannelConfig::default()) {
            Err(ShmError::Refused { uid, .. }) => println!("{SAY}refused uid={uid}"),
            Err(e) => println!("{SAY}error {e}"),
            Ok(_) => println!("{SAY}accepted"),
        }
    }
}

/// Alternates busy phases (both sides spinning) with sleepy ones (both sides blocked, the client
/// ringing the doorbell and the server waking it by futex), counting stalls.
fn alternate(total: usize) {
    let dir = Scratch::new("wake");
    let path = dir.path("s");
    let cfg = ShmServerConfig { spin: SpinPolicy::Budget(Duration::from_micros(10)), ..ShmServerConfig::default() };
    let _server = EchoServer::start(&path, cfg);
    let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
    let mut slow = 0usize;
    let mut worst = Duration::ZERO;
    let mut done = 0usize;
    let mut phase = 0u32;
    let msg = [7u8; 40];
    let started = Instant::now();
    while done < total {
        let sleepy = phase % 2 == 1;
        ch.set_spin_policy(if sleepy { SpinPolicy::Block } else { SpinPolicy::Budget(Duration::from_micros(50)) });
        let n = if sleepy { 100 } else { 900 }.min(total - done);
        for _ in 0..n {
            if sleepy {
                // Long enough for the server to give up spinning and arm the connection.
                std::thread::sleep(Duration::from_micros(20));
            }
            let t = Instant::now();
            let got = ch.call(&[&msg], t + Duration::from_secs(2)).expect("round trip stalled past its deadline");
            assert_eq!(got, &msg);
            let d = t.elapsed();
            worst = worst.max(d);
            if d > Duration::from_millis(9) {
                slow += 1;
            }
        }
        done += n;
        phase += 1;
    }
    eprintln!("{total} round trips in {:?}: worst {worst:?}, {slow} over 9 ms", started.elapsed());
    // A lost wake-up costs a whole 10 ms liveness slice (client) or 50 ms (server): a handful
    // can be scheduling noise on a loaded machine; a systematic loss cannot hide under this.
    assert!(slow <= total / 5000 + 3, "{slow} round trips took over 9 ms: wake-ups lost?");
}

#[test]
fn no_lost_wakeups_100k() {
    alternate(100_000);
}

#[test]
#[ignore = "1,000,000 round trips, ~15 s: run with --ignored"]
fn no_lost_wakeups_1m() {
    alternate(1_000_000);
}

#[test]
fn idle_server_sleeps() {
    let dir = Scratch::new("idle");
    let path = dir.path("s");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut server = lowlat_shm::ShmServer::bind(&path, ShmServerConfig::default()).unwrap();
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        server.run(&mut echo, &s2).unwrap();
        lowlat_sys::process::thread_cpu_time()
    });
    let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
    for _ in 0..100 {
        ch.call(&[b"warm"], deadline(Duration::from_secs(2))).unwrap();
    }
    std::thread::sleep(Duration::from_millis(400));
    // Still answers promptly after sleeping.
    let t0 = Instant::now();
    assert_eq!(ch.call(&[b"wake"], deadline(Duration::from_secs(2))).unwrap(), b"wake");
    let first = t0.elapsed();
    stop.store(true, Ordering::SeqCst);
    let cpu = t.join().unwrap();
    eprintln!("server thread CPU over ~0.4 s mostly idle: {cpu:?}; first call after idle {first:?}");
    assert!(cpu < Duration::from_millis(100), "idle server burnt {cpu:?}");
}

/// The pull-style API the runtime drives: `serve_next` / `send_reply` / `block` /
/// `watch` on the server, `try_recv` / `block` on the client. Even calls are answered in place
/// through their `Reply`, odd ones later with `send_reply`.
#[test]
fn pull_style_serving() {
    use lowlat_shm::{Activity, ShmServer};
    use std::os::fd::AsRawFd;
    let dir = Scratch::new("pull");
    let path = dir.path("s");
    let mut server = ShmServer::bind(&path, small_rings()).unwrap();
    let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
    server.watch(a.as_raw_fd()).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let (mut served, mut closed, mut wakes) = (0, 0, 0);
        while !s2.load(Ordering::SeqCst) {
            let mut from = None;
            let got = server.serve_next(|id, request, reply| {
                from = Some(id);
                if served % 2 == 1 {
                    reply.send(&[b"re:", request]).unwrap();
                    false
                } else {
                    buf.clear();
                    buf.extend_from_slice(request);
                    true
                }
            });
            match got {
                Some(Activity::Request(id, later)) => {
                    assert_eq!(from, Some(id), "reported the connection it served");
                    served += 1;
                    if later {
                        server.send_reply(id, &[b"re:", &buf]).unwrap();
                    }
                }
                Some(Activity::Closed(_)) => closed += 1,
                None => {
                    let t = Instant::now();
                    server.block(Some(Duration::from_secs(5))).unwrap();
                    if t.elapsed() < Duration::from_secs(4) {
                        wakes += 1;
                    }
                }
            }
        }
        (served, closed, wakes)
    });
    let mut chans: Vec<ShmChannel> =
        (0..2).map(|_| ShmChannel::connect(&path, ChannelConfig::default()).unwrap()).collect();
    for i in 0..500usize {
        let ch = &mut chans[i % 2];
        let msg = pattern(i % 9000, i as u8);
        ch.send(&[&msg], deadline(Duration::from_secs(5))).unwrap();
        let give_up = deadline(Duration::from_secs(5));
        loop {
            if let Some(got) = ch.try_recv().unwrap() {
                assert_eq!(&got[..3], b"re:");
                assert!(got[3..] == msg[..], "reply {i} differs");
                break;
            }
            assert!(Instant::now() < give_up, "no reply to call {i}");
            ch.block(Some(Duration::from_millis(20))).unwrap();
        }
        // Nothing more: the reply is not handed out twice.
        assert!(ch.try_recv().unwrap().is_none());
    }
    drop(chans);
    // A watched descriptor wakes the sleeping server.
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    b.send(b"!").unwrap();
    let (served, closed, wakes) = t.join().unwrap();
    assert_eq!((served, closed), (500, 2));
    assert!(wakes > 0);
}

/// Busy-polling: connections idle for a while are polled less often (no doorbell), yet answered.
#[test]
fn busy_polling_server_answers_long_idle_bindings() {
    let dir = Scratch::new("cool");
    let path = dir.path("s");
    let _server = EchoServer::start(&path, ShmServerConfig { spin: SpinPolicy::Forever, ..small_rings() });
    let cfg = ChannelConfig { spin: SpinPolicy::Forever, ..ChannelConfig::default() };
    let mut busy = ShmChannel::connect(&path, cfg.clone()).unwrap();
    let mut idle = ShmChannel::connect(&path, cfg).unwrap();
    for round in 0..5u8 {
        let until = Instant::now() + Duration::from_millis(5);
        while Instant::now() < until {
            busy.call(&[b"busy"], deadline(Duration::from_secs(2))).unwrap();
        }
        let t = Instant::now();
        assert_eq!(idle.call(&[&[round]], deadline(Duration::from_secs(2))).unwrap(), &[round]);
        assert!(t.elapsed() < Duration::from_millis(500), "idle connection answered after {:?}", t.elapsed());
    }
}

/// A server that stops accepting or never answers the handshake costs a client its connect
/// timeout, not a hang.
#[test]
fn unresponsive_server_times_out_connect() {
    let dir = Scratch::new("mute");
    let cfg = ChannelConfig { connect_timeout: Duration::from_millis(100), ..ChannelConfig::default() };
    // Accepts, never answers.
    let path = dir.path("mute");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let t = Instant::now();
    let e = ShmChannel::connect(&path, cfg.clone()).unwrap_err();
    assert!(matches!(e, ShmError::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));
    drop(l);
    // Never accepts, backlog full: connect itself would block.
    let path = dir.path("full");
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    s.bind(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
    s.listen(0).unwrap();
    let mut fillers = Vec::new();
    let t = Instant::now();
    let e = loop {
        match ShmChannel::connect(&path, cfg.clone()) {
            Err(ShmError::Timeout { .. }) if fillers.len() < 8 => {
                // Either the handshake or connect timed out; fill the backlog with plain
                // connections until connect itself is what blocks.
                let f = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
                f.set_nonblocking(true).unwrap();
                let _ = f.connect(&socket2::SockAddr::unix(&path).unwrap());
                fillers.push(f);
            }
            Err(e) => break e,
            Ok(_) => panic!("nobody answers: connect cannot succeed"),
        }
    };
    assert!(matches!(e, ShmError::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// A reply the server published before it went is delivered, not reported as a hang-up: a
/// waiter that comes back from its wait only after the server has exited (a starved CPU) finds
/// the reply first, through `block` then `try_recv`, through `recv`, and after a parked wait.
#[test]
fn a_reply_published_before_the_server_went_is_delivered() {
    use lowlat_shm::{Activity, ShmServer};
    let dir = Scratch::new("last-reply");
    let path = dir.path("s");
    for way in ["block", "recv", "park"] {
        let _ = std::fs::remove_file(&path);
        let mut server = ShmServer::bind(&path, small_rings()).unwrap();
        let serving = std::thread::spawn(move || {
            let give_up = Instant::now() + Duration::from_secs(5);
            loop {
                let got = server.serve_next(|_, request, reply| reply.send(&[b"last:", request]).unwrap());
                if let Some(Activity::Request(..)) = got {
                    break; // the server goes, its connection with it
                }
                assert!(Instant::now() < give_up, "no request");
                server.block(Some(Duration::from_millis(10))).unwrap();
            }
        });
        let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
        ch.send(&[b"words"], deadline(Duration::from_secs(5))).unwrap();
        serving.join().unwrap();
        let hung_up = Instant::now() + Duration::from_secs(5);
        while !lowlat_sys::hung_up(ch.liveness_fd()) {
            assert!(Instant::now() < hung_up, "the connection outlived its server");
            std::thread::sleep(Duration::from_millis(1));
        }
        let got = match way {
            // A wait whose slice ran out (1 ns) with the server gone and the reply there.
            "block" => {
                ch.block(Some(Duration::from_nanos(1))).unwrap();
                ch.try_recv().unwrap().map(<[u8]>::to_vec)
            }
            "recv" => Some(ch.recv(deadline(Duration::from_secs(1))).unwrap().to_vec()),
            _ => {
                let _ = ch.park().unwrap();
                ch.unpark(true).unwrap();
                ch.try_recv().unwrap().map(<[u8]>::to_vec)
            }
        };
        assert_eq!(got.as_deref(), Some(&b"last:words"[..]), "{way}");
        // Then, with nothing left to read, the hang-up is reported.
        assert!(ch.try_recv().unwrap().is_none(), "{way}: the reply was handed out twice");
        let e = ch.block(Some(Duration::from_nanos(1))).unwrap_err();
        assert!(matches!(e, ShmError::PeerGone), "{way}: {e}");
    }
}

/// A server serving one client keeps another client's connection polled while it is quiet for
/// less than a millisecond (its next call is found without its doorbell, a system call for the
/// client), and arms it once quiet for longer. Driven pull-style, as lowlat's runtime drives it.
#[test]
fn a_busy_server_keeps_a_quiet_connection_polled_for_a_millisecond() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let dir = Scratch::new("quiet");
    let path = dir.path("s");
    // A fixed budget: an adaptive one drops to none (arming at once, as blocking) when calls
    // come slowly, as on a loaded machine.
    let spin = SpinPolicy::Budget(Duration::from_micros(50));
    let mut server = ShmServer::bind(&path, ShmServerConfig { spin, ..small_rings() }).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // When the server last answered the quiet client, and its connection.
    let quiet_answered = std::cell::Cell::new(None::<(Instant, lowlat_shm::ConnectionId)>);
    let serve_until = |server: &mut ShmServer, until: &mut dyn FnMut(&ShmServer) -> bool| {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !until(server) {
            assert!(Instant::now() < give_up, "the server never got there");
            let _ = server.serve_next(|id, request, reply| {
                let r = reply.send(&[request]);
                if request == b"quiet" {
                    quiet_answered.set(Some((Instant::now(), id)));
                }
                r
            });
        }
    };
    let hot = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                ch.call(&[b"hot"], deadline(Duration::from_secs(5))).unwrap();
            }
        })
    };
    serve_until(&mut server, &mut |s| s.connection_count() == 1);
    // The quiet client calls once while the hot one keeps the server busy; a look 0.2-0.8 ms
    // after the answer finds its connection still polled. With no look in that window (the
    // server's thread descheduled), again with a new quiet client.
    let mut kept = None;
    for _ in 0..5 {
        quiet_answered.set(None);
        let quiet = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
                ch.call(&[b"quiet"], deadline(Duration::from_secs(5))).unwrap();
                ch
            })
        };
        // Whether the quiet connection was polled at every look 0.2-0.8 ms after its answer,
        // and at a look 5 ms after it.
        let mut in_window = None;
        let mut later = true;
        serve_until(&mut server, &mut |s| {
            let Some((answered, id)) = quiet_answered.get() else { return false };
            let quiet_for = answered.elapsed();
            if quiet_for >= Duration::from_micros(200) && quiet_for < Duration::from_micros(800) {
                in_window = Some(in_window.unwrap_or(true) && s.is_active(id));
            }
            later = s.is_active(id);
            quiet_for >= Duration::from_millis(5)
        });
        serve_until(&mut server, &mut |_| quiet.is_finished());
        drop(quiet.join().unwrap());
        if let Some(polled) = in_window {
            kept = Some((polled, later));
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    serve_until(&mut server, &mut |_| hot.is_finished());
    hot.join().unwrap();
    assert_eq!(kept, Some((true, false)), "(the quiet connection polled 0.2-0.8 ms after its call; after 5 ms)");
}
