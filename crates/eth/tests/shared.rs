//! Several threads sharing one AF_XDP socket, each receiving only its slot's frames.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use lowlat_eth::pingpong;
use lowlat_eth::shared::SharedXdp;
use lowlat_eth::{EthConfig, EthSocket, XdpConfig};
use lowlat_transport::{SpinPolicy, Spinner};

fn threads_share_one_socket(spin: SpinPolicy) {
    let Some(h) = common::hosts(1500) else { return };
    let iface_a = h.a.iface.clone();
    let mut server = common::join(h.a.spawn(move || EthSocket::open(&iface_a, EthConfig::default()).unwrap()), 5);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = std::thread::spawn(move || pingpong::serve(&mut server, SpinPolicy::Block, &st).unwrap());

    let iface_b = h.b.iface.clone();
    let shared = common::join(h.b.spawn(move || SharedXdp::get_or_open(&iface_b, XdpConfig::default()).unwrap()), 5);
    // The same interface in the same namespace gives the same socket.
    let iface_b = h.b.iface.clone();
    let again = common::join(h.b.spawn(move || SharedXdp::get_or_open(&iface_b, XdpConfig::default()).unwrap()), 5);
    assert!(Arc::ptr_eq(&shared, &again));
    drop(again);

    let peer = h.a.mac;
    const THREADS: u16 = 4;
    const ROUNDS: u32 = 200;
    let workers: Vec<_> = (0..THREADS)
        .map(|slot| {
            let mut hd = shared.handle();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; hd.shared().max_payload()];
                let mut spinner = Spinner::new(spin);
                for round in 0..ROUNDS {
                    let mut head = [0u8; 32];
                    head[..3].copy_from_slice(b"Ll\x01");
                    head[6..8].copy_from_slice(&slot.to_le_bytes());
                    head[16..20].copy_from_slice(&round.to_le_bytes());
                    let body = common::pattern(64 + slot as usize * 100, slot as u8);
                    hd.send_to(peer, &head, &body).unwrap();
                    let got = spinner
                        .wait_on(Some(common::deadline(5)), &mut hd, |h| h.try_recv_from(&mut buf), |h, t| h.block(t))
                        .unwrap()
                        .expect("reply lost");
                    assert_eq!(got.0, 32 + body.len());
                    assert_eq!(&buf[6..8], &slot.to_le_bytes(), "another slot's frame");
                    assert_eq!(&buf[16..20], &round.to_le_bytes());
                    assert_eq!(&buf[32..got.0], &body[..]);
                }
            })
        })
        .collect();
    let end = common::deadline(20);
    for w in workers {
        while !w.is_finished() {
            assert!(std::time::Instant::now() < end, "workers stuck");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert_eq!(server.join().unwrap(), (THREADS as u64) * ROUNDS as u64);
    assert_eq!(shared.unclaimed.load(Ordering::Relaxed), 0);
}

#[test]
fn blocking_threads() {
    threads_share_one_socket(SpinPolicy::Block);
}

#[test]
fn spinning_threads() {
    threads_share_one_socket(SpinPolicy::Budget(std::time::Duration::from_micros(20)));
}
