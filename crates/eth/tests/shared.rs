//! Several threads sharing one AF_XDP socket, each receiving only its slot's frames.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use lowlat_eth::shared::SharedXdp;
use lowlat_eth::{EthConfig, EthSocket, XdpConfig};
use lowlat_proto::wire::{Header, HeaderView, Kind, HEADER_LEN};
use lowlat_wait::{SpinPolicy, Spinner};

fn threads_share_one_socket(spin: SpinPolicy) {
    let Some(h) = common::hosts(1500) else { return };
    let iface_a = h.a.iface.clone();
    let mut server = common::join(h.a.spawn(move || EthSocket::open(&iface_a, EthConfig::default()).unwrap()), 5);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = std::thread::spawn(move || common::echo_until(&mut server, SpinPolicy::Block, &st).unwrap());

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
                    let mut h = Header::new(Kind::Call);
                    (h.slot, h.call_no) = (slot, round);
                    let head = h.to_bytes();
                    let body = common::pattern(64 + slot as usize * 100, slot as u8);
                    hd.send_to(peer, &head, &body).unwrap();
                    let got = spinner
                        .wait_on(Some(common::deadline(5)), &mut hd, |h| h.try_recv_from(&mut buf), |h, t| h.block(t))
                        .unwrap()
                        .expect("reply lost");
                    assert_eq!(got.0, HEADER_LEN + body.len());
                    let echoed = HeaderView::new_checked(&buf[..got.0]).expect("a lowlat frame");
                    assert_eq!(echoed.slot(), slot, "another slot's frame");
                    assert_eq!(echoed.call_no(), round);
                    assert_eq!(echoed.body(), &body[..]);
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
