//! Servers of one path as a group (`ShmServer::bind_group`), a thread each: connections are
//! spread over the members as they are admitted, a member hands a connection to another with
//! its request unread, and the group's connection limit holds for the group.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use lowlat_shm::{ChannelConfig, ShmChannel, ShmError, ShmServer, ShmServerConfig};

/// Drives one member: answers "member:request", except that a request "to N" (N another member)
/// is handed, unread, to member N, which answers it.
fn drive(mut s: ShmServer, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let me = s.member();
        while !stop.load(Ordering::Relaxed) {
            let served = s.serve_next(|_, request, reply| {
                let to = request.strip_prefix(b"to ").and_then(|n| std::str::from_utf8(n).ok()?.parse().ok());
                match to {
                    Some(to) if to != me => reply.hand_over(to),
                    _ => {
                        let answer = [format!("{me}:").as_bytes(), request].concat();
                        reply.send(&[&answer]).unwrap();
                    }
                }
            });
            if served.is_none() {
                s.block(Some(Duration::from_millis(20))).unwrap();
            }
        }
    })
}

fn call(ch: &mut ShmChannel, msg: &str) -> String {
    String::from_utf8(ch.call(&[msg.as_bytes()], deadline(Duration::from_secs(5))).unwrap().to_vec()).unwrap()
}

#[test]
fn connections_spread_and_move_with_their_request() {
    let dir = Scratch::new("group");
    let path = dir.path("s");
    let cfg = ShmServerConfig { max_connections: 3, ..ShmServerConfig::default() };
    let members = ShmServer::bind_group(&path, cfg, 2).unwrap();
    assert_eq!(members.iter().map(ShmServer::member).collect::<Vec<_>>(), [0, 1]);
    assert!(members.iter().all(|m| m.members() == 2));
    // Two clients waiting at the listener before the group serves: both are answered in one
    // look, and placed in the order they came.
    let connecting = |delay| {
        let path = path.clone();
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            ShmChannel::connect(&path, ChannelConfig::default()).unwrap()
        })
    };
    let (first, second) = (connecting(Duration::ZERO), connecting(Duration::from_millis(50)));
    std::thread::sleep(Duration::from_millis(100));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = members.into_iter().map(|m| drive(m, stop.clone())).collect();

    // Admitted in turn: the first to member 0, the second to member 1.
    let mut a = first.join().unwrap();
    let mut b = second.join().unwrap();
    assert_eq!(call(&mut a, "hi"), "0:hi");
    assert_eq!(call(&mut b, "hi"), "1:hi");
    // Handed over with its request: member 1 answers it, and every later one.
    assert_eq!(call(&mut a, "to 1"), "1:to 1");
    assert_eq!(call(&mut a, "again"), "1:again");
    assert_eq!(call(&mut b, "to 0"), "0:to 0");
    assert_eq!(call(&mut b, "again"), "0:again");
    // A member not in the group: the request is dropped, the connection stays where it is.
    let mut c = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
    c.send(&[b"to 7"], deadline(Duration::from_secs(5))).unwrap();
    assert!(matches!(c.recv(deadline(Duration::from_millis(100))), Err(ShmError::Timeout { .. })));
    assert_eq!(call(&mut c, "still"), "0:still");
    // Three connections across the group: a fourth is refused as busy.
    match ShmChannel::connect(&path, ChannelConfig::default()) {
        Err(ShmError::Busy) => {}
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("a fourth connection beyond the group's limit of three"),
    }
    // One closes (counted by the member that held it, not the one that admitted it): room again.
    drop(a);
    let mut d = (0..100)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            ShmChannel::connect(&path, ChannelConfig::default()).ok()
        })
        .expect("room once a connection closed");
    assert_eq!(call(&mut d, "x").len(), 3);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(!path.exists(), "the first member removes the socket file");
}
