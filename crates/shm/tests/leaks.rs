//! kill -9 of clients: the server frees each connection (mapping and descriptors). Alone in its own
//! test binary so that no other test opens descriptors or maps memory while it counts them.

mod common;

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use lowlat_shm::{ChannelConfig, ShmChannel, ShmServerConfig};

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn count_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

#[test]
fn killed_clients_leave_nothing_behind() {
    let dir = Scratch::new("kill-client");
    let path = dir.path("s");
    let server = EchoServer::start(&path, ShmServerConfig::default());
    let cycle = |i: usize| {
        let served = server.counters.served.load(Ordering::SeqCst);
        // Even cycles: the client idles after one call. Odd: it is killed mid-stream of calls.
        let role = if i & 1 == 0 { "idle" } else { "busy" };
        let mut c = child("child_entry", &format!("{role}:{}", path.display())).stdout(Stdio::null()).spawn().unwrap();
        server.wait_for("the child's first call", |c| c.served.load(Ordering::SeqCst) > served);
        kill9(&mut c);
        server.wait_for("the connection to close", |c| c.live.load(Ordering::SeqCst) == 0);
    };
    for i in 0..4 {
        cycle(i);
    }
    let (fds, maps) = (count_fds(), count_maps());
    let t = Instant::now();
    for i in 0..200 {
        cycle(i);
    }
    let (fds2, maps2) = (count_fds(), count_maps());
    eprintln!("200 kill cycles in {:?}: fds {fds} -> {fds2}, maps {maps} -> {maps2}", t.elapsed());
    assert_eq!(server.counters.closed.load(Ordering::SeqCst), 204);
    // A leak only adds: the first count may still hold the last connection's descriptors,
    // which its serving thread closes just after it counts the connection gone.
    assert!(fds2 <= fds, "descriptors leaked: {fds} -> {fds2}");
    // A leaking connection would add 3 mappings per cycle (600 in all); allow the allocator a few.
    assert!(maps2 <= maps + 4, "mappings leaked: {maps} -> {maps2}");
}

#[test]
#[ignore = "child process entry point for other tests"]
fn child_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (mode, p) = role.split_once(':').unwrap();
    let mut ch = ShmChannel::connect(p, ChannelConfig::default()).unwrap();
    let msg = vec![9u8; if mode == "busy" { 200_000 } else { 16 }];
    let until = Instant::now() + Duration::from_secs(30);
    ch.call(&[&msg], until).unwrap();
    // Until killed (bounded in case the parent died).
    while Instant::now() < until {
        if mode == "busy" {
            let _ = ch.call(&[&msg], until);
        } else {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
