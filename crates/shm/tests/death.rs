//! kill -9 of the server during calls: the client gets a clear error within its deadline.

mod common;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use common::*;
use lowlat_shm::{ChannelConfig, ShmChannel, ShmError, ShmServerConfig, SpinPolicy};

fn killed_server_is_noticed(spin: SpinPolicy, size: usize) {
    let dir = Scratch::new("kill-server");
    let path = dir.path("s");
    let mut server = child("child_entry", &format!("serve:{}", path.display())).spawn().unwrap();
    wait_for_path(&path);
    let mut ch = ShmChannel::connect(&path, ChannelConfig { spin, ..ChannelConfig::default() }).unwrap();
    let msg = pattern(size, 3);
    for _ in 0..100 {
        assert_eq!(ch.call(&[&msg], Instant::now() + Duration::from_secs(5)).unwrap(), &msg[..]);
    }
    // Kill while a call is outstanding: the request is in the ring, nobody will ever answer.
    ch.send(&[&msg], Instant::now() + Duration::from_secs(5)).unwrap();
    let killed = Instant::now();
    kill9(&mut server);
    let deadline = Duration::from_secs(5);
    let e = loop {
        match ch.recv(killed + deadline) {
            // The answer raced the kill: ask again; the next one cannot be answered.
            Ok(_) => {
                if let Err(e) = ch.send(&[&msg], killed + deadline) {
                    break e;
                }
            }
            Err(e) => break e,
        }
    };
    let noticed = killed.elapsed();
    eprintln!("{spin:?}, {size} B: server death noticed after {noticed:?}: {e}");
    assert!(matches!(e, ShmError::PeerGone), "expected PeerGone, got {e}");
    assert!(noticed < Duration::from_secs(1), "took {noticed:?}");
    // The connection stays failed, with the reason.
    assert!(matches!(ch.call(&[b"x"], Instant::now() + Duration::from_secs(1)), Err(ShmError::Broken(_))));
}

#[test]
fn killed_server_fails_calls_blocking() {
    killed_server_is_noticed(SpinPolicy::Block, 64);
}

#[test]
fn killed_server_fails_calls_busy_polling() {
    killed_server_is_noticed(SpinPolicy::Forever, 64);
}

#[test]
fn killed_server_fails_streamed_calls() {
    killed_server_is_noticed(SpinPolicy::Adaptive, 300_000);
}

#[test]
#[ignore = "child process entry point for other tests"]
fn child_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    if let Some(p) = role.strip_prefix("serve:") {
        let stop = AtomicBool::new(false);
        // Runs until killed by the parent test.
        lowlat_shm::ShmServer::bind(p, ShmServerConfig::default()).unwrap().run(&mut echo, &stop).unwrap();
    }
}
