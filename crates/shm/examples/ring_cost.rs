//! Instructions per ring exchange, for callgrind: one thread plays both ends of a connection (the
//! client's send, the server's echo, the client's receive), so nothing waits and every count
//! repeats exactly.
//!
//! `valgrind --tool=callgrind --toggle-collect='*ring_cost*exchange*' ring_cost ROUNDS SIZE`

use std::time::Duration;

use lowlat_shm::{ChannelConfig, ShmChannel, ShmServer, ShmServerConfig, SpinPolicy};

#[inline(never)]
fn exchange(ch: &mut ShmChannel, server: &mut ShmServer, msg: &[u8], rounds: usize) -> usize {
    let mut ok = 0;
    for _ in 0..rounds {
        ch.send_two_within(msg, &[], Duration::from_secs(5)).unwrap();
        server.serve_next(|_, request, reply| reply.send(&[request])).unwrap();
        if ch.try_recv().unwrap().is_some_and(|m| m.len() == msg.len()) {
            ok += 1;
        }
    }
    ok
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let size: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(32);
    let dir = std::env::temp_dir().join(format!("llshm-ring-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s");
    let cfg = ShmServerConfig { spin: SpinPolicy::Forever, ..ShmServerConfig::default() };
    let mut server = ShmServer::bind(&path, cfg).unwrap();
    let p2 = path.clone();
    let connecting = std::thread::spawn(move || {
        ShmChannel::connect(&p2, ChannelConfig { spin: SpinPolicy::Forever, ..ChannelConfig::default() }).unwrap()
    });
    while !connecting.is_finished() {
        let _ = server.serve_next(|_, _, _| ());
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut ch = connecting.join().unwrap();
    let msg = vec![7u8; size];
    let ok = exchange(&mut ch, &mut server, &msg, rounds);
    assert_eq!(ok, rounds, "every echo came back whole");
    println!("{rounds} exchanges of {size} bytes");
    drop(ch);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
