//! Endpoints served by several threads (`ServerConfig::threads`): sessions spread over the
//! threads and every frame of a session reaches the thread that holds it; the session limits
//! hold for the endpoint as a whole; what the threads counted adds up.

use std::time::Duration;

use lowlat::{Client, ClientConfig, Error, Program, Server, ServerConfig};
use lowlat_proto::Shard;

mod common;
use common::{lab_program, Lab, PROG};

const THREADS: usize = 4;

fn serve(cfg: ServerConfig, program: Program) -> (Server, String) {
    serve_at("udp://127.0.0.1:0", cfg, program)
}

fn serve_at(listen: &str, cfg: ServerConfig, program: Program) -> (Server, String) {
    let server = Server::builder().program(program).config(cfg).serve(&[listen]).expect("serving");
    let uri = server.local_uris()[0].clone();
    (server, uri)
}

/// Over udp: 32 clients (each its own port: binds reach the threads by a hash of their
/// addresses) bind and call; each session lies in the token range of one thread, more than one
/// thread holds sessions, and no frame reached a thread that did not know its session (the
/// steering program sent each to its owner).
#[test]
fn sessions_spread_over_the_threads_and_each_frame_reaches_its_own() {
    sessions_spread("udp://127.0.0.1:0", 1);
}

/// Over shm: 32 clients, each calling from 4 threads at once (4 slots, a connection each, the
/// connections admitted by the threads in turn); every connection of a session is handed to the
/// thread holding it, so none of its frames reaches another thread's engine (without the
/// hand-over, calls fail: unknown session).
#[test]
fn shm_connections_join_the_thread_of_their_session() {
    let dir = tempfile::tempdir().unwrap();
    sessions_spread(&format!("shm://{}/s", dir.path().display()), 4);
}

/// Over tcp, as over shm: every connection of a session is handed, with its frame, to the
/// thread holding the session.
#[test]
fn tcp_connections_join_the_thread_of_their_session() {
    sessions_spread("tcp://127.0.0.1:0", 4);
}

/// Sessions of 32 clients, each calling from `callers` threads at once, spread over the
/// threads of an endpoint at `listen`; each is counted by the thread that holds it, and no
/// frame reached a thread that did not hold its session.
fn sessions_spread(listen: &str, callers: i32) {
    let (server, uri) = serve_at(listen, ServerConfig { threads: THREADS, ..ServerConfig::default() }, lab_program());
    let clients: Vec<Client> = (0..32).map(|_| Client::connect(&uri, PROG, 1).expect("binding")).collect();
    let mut owners = [0usize; THREADS];
    for (i, c) in clients.iter().enumerate() {
        std::thread::scope(|s| {
            for t in 0..callers {
                s.spawn(move || {
                    let lab = Lab::new(c);
                    for k in 0..20 {
                        assert_eq!(lab.minus(i as i32, k + t).unwrap(), i as i32 - k - t);
                    }
                });
            }
        });
        let owner = Shard::owner(c.session().token, THREADS as u16) as usize;
        assert!(owner < THREADS, "token {:#x} in no thread's range", c.session().token);
        owners[owner] += 1;
    }
    assert!(owners.iter().filter(|&&n| n > 0).count() >= 2, "sessions on one thread only: {owners:?}");
    let per_thread = server.stats_per_thread();
    let threads = &per_thread[0].1;
    assert_eq!(threads.len(), THREADS);
    for (t, s) in threads.iter().enumerate() {
        assert_eq!(s.binds_granted as usize, owners[t], "thread {t}: {s:?}");
        assert_eq!(s.unknown_session, 0, "thread {t} got frames of sessions it does not hold");
    }
    let all = &server.stats()[0].1;
    assert_eq!(all.binds_granted, 32);
    assert_eq!(all.calls, threads.iter().map(|s| s.calls).sum::<u64>());
    assert!(all.calls >= 32 * 20 * callers as u64);
    assert_eq!(all.sessions_open, 32);
}

/// The per-source cap is the endpoint's, whichever threads the sessions landed on: with three
/// sessions of 127.0.0.1 each running a long call (none may be given up), a fourth bind is
/// refused, and once the calls end and the sessions expire a new one gets in. (A thread gives
/// up only its own idle sessions to make room: a bind that reaches a thread holding none of its
/// source's waits for the others' to expire.)
#[test]
fn the_per_source_cap_holds_across_the_threads() {
    let program = Program::new(PROG, 1).long_running(1, "SLOW", |_, _, _| {
        std::thread::sleep(Duration::from_millis(600));
        Ok(())
    });
    let idle = Duration::from_millis(300);
    let cfg = ServerConfig {
        threads: THREADS,
        max_sessions_per_source: 3,
        session_idle: idle,
        unused_session_idle: idle,
        ..ServerConfig::default()
    };
    let (server, uri) = serve(cfg, program);
    let quick = ClientConfig { bind_timeout: Duration::from_secs(2), ..ClientConfig::default() };
    let slow: Vec<_> = (0..3)
        .map(|_| {
            let c = Client::connect_with(&uri, PROG, 1, quick.clone()).expect("binding within the cap");
            std::thread::spawn(move || common::bytes(1, &c, &[]))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(150));
    match Client::connect_with(&uri, PROG, 1, quick.clone()) {
        Err(Error::SourceLimit { .. }) => {}
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("a fourth session of one source while three ran calls"),
    }
    for t in slow {
        t.join().unwrap().expect("the slow call");
    }
    std::thread::sleep(idle * 2);
    let c = Client::connect_with(&uri, PROG, 1, quick).expect("room again once the calls ended");
    common::bytes(0, &c, &[]).expect_err("procedure 0 is not served").to_string();
    assert_eq!(server.stats()[0].1.refused_source_limit, 1);
}

/// `ClientConfig::pin_cpus` pins the threads lowlat starts for a client (its acknowledger, the
/// process's reactor) to those CPUs; a CPU that does not exist is refused at connect.
#[test]
fn a_client_pins_the_threads_lowlat_starts_for_it() {
    let (_server, uri) = serve(ServerConfig::default(), lab_program());
    let cpus = |name: &str| -> Vec<String> {
        let tasks = std::fs::read_dir("/proc/self/task").unwrap();
        tasks
            .filter_map(|t| {
                let t = t.unwrap().path();
                let comm = std::fs::read_to_string(t.join("comm")).ok()?;
                (comm.trim() == name).then(|| {
                    let status = std::fs::read_to_string(t.join("status")).unwrap();
                    let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap();
                    line.split_whitespace().nth(1).unwrap().to_string()
                })
            })
            .collect()
    };
    let cfg = ClientConfig { pin_cpus: vec![0], ..ClientConfig::default() };
    let c = Client::connect_with(&uri, PROG, 1, cfg).expect("binding");
    assert_eq!(Lab::new(&c).minus(3, 1).unwrap(), 2);
    assert_eq!(cpus("lowlat-reactor"), ["0"]);
    assert!(cpus("lowlat-acks").contains(&"0".to_string()), "{:?}", cpus("lowlat-acks"));
    let nowhere = ClientConfig { pin_cpus: vec![100_000], ..ClientConfig::default() };
    match Client::connect_with(&uri, PROG, 1, nowhere) {
        Err(Error::Io { .. }) => {}
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("pinned to a CPU that does not exist"),
    }
}

/// A second server on a port a server of several threads holds is refused, as any second
/// server is, rather than joining its group of sockets and taking a share of its sessions'
/// datagrams; and the other way round.
#[test]
fn a_second_server_cannot_join_the_threads_port() {
    let (first, uri) = serve(ServerConfig { threads: THREADS, ..ServerConfig::default() }, lab_program());
    for threads in [1, THREADS] {
        let second = Server::builder()
            .program(lab_program())
            .config(ServerConfig { threads, ..ServerConfig::default() })
            .serve(&[&uri]);
        match second {
            Err(Error::Io { source, .. }) => assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse, "{source}"),
            Err(e) => panic!("refused for the wrong reason: {e}"),
            Ok(_) => panic!("a second server of {threads} threads served {uri}"),
        }
    }
    let c = Client::connect(&uri, PROG, 1).expect("binding");
    assert_eq!(Lab::new(&c).minus(7, 2).unwrap(), 5, "the first server still serves");
    drop(first);
    let single = serve(ServerConfig::default(), lab_program()).0;
    let taken = single.local_uris()[0].clone();
    let cfg = ServerConfig { threads: THREADS, ..ServerConfig::default() };
    assert!(Server::builder().program(lab_program()).config(cfg).serve(&[&taken]).is_err());
}
