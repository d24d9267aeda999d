//! eth:// between two network namespaces.

mod common;

use std::time::Duration;

use lowlat_eth::frame::{self, FrameType};
use lowlat_eth::{EthConfig, EthSocket, Filter, FrameSocket, Mac};
use lowlat_proto::wire::{Header, HeaderView, Kind};
use lowlat_wait::{SpinPolicy, Spinner};

/// Echoes `n` payloads back to their sender.
fn echo_server(iface: String, cfg: EthConfig, n: usize) -> impl FnOnce() -> EthSocket {
    let mut s = EthSocket::open(&iface, EthConfig { answer_discovery: true, ..cfg }).expect("server socket");
    move || {
        let mut buf = vec![0u8; s.max_payload()];
        let mut spin = Spinner::new(SpinPolicy::Block);
        for _ in 0..n {
            let (len, src) =
                s.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().expect("server timed out");
            s.send_to(src, &buf[..len.min(32)], &buf[len.min(32)..len]).unwrap();
        }
        s
    }
}

fn exchange(cfg: EthConfig, discover: bool) {
    let Some(h) = common::hosts(1500) else { return };
    let sizes = [1usize, 32, 100, 1024, 1400];
    // The server socket is opened before the client sends, so nothing is lost.
    let server = common::join(
        h.a.spawn({
            let iface = h.a.iface.clone();
            move || echo_server(iface, cfg, sizes.len() + 1)
        }),
        5,
    );
    let server = std::thread::spawn(server);
    let server_mac = h.a.mac;
    let iface = h.b.iface.clone();
    let client = h.b.spawn(move || {
        let mut c = EthSocket::open(&iface, cfg).unwrap();
        let peer = if discover { c.discover(5, Duration::from_millis(200)).unwrap() } else { server_mac };
        assert_eq!(peer, server_mac);
        let max = c.max_payload();
        let mut buf = vec![0u8; max];
        let mut spin = Spinner::new(SpinPolicy::Budget(Duration::from_micros(50)));
        for (i, &len) in sizes.iter().chain(std::iter::once(&max)).enumerate() {
            let msg = common::pattern(len, i as u8);
            let split = len / 3;
            c.send_to(peer, &msg[..split], &msg[split..]).unwrap();
            let (n, src) = c.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().expect("no echo");
            assert_eq!(src, peer);
            assert_eq!(&buf[..n], &msg[..], "payload of {len} bytes");
        }
        // Larger than one frame: a typed error, not a truncated frame.
        let big = vec![0u8; max + 1];
        assert!(matches!(c.send_to(peer, &big, &[]), Err(lowlat_eth::Error::TooLong { .. })));
        c.stats().rx_bad_crc.load(std::sync::atomic::Ordering::Relaxed)
    });
    assert_eq!(common::join(client, 10), 0);
    let s = server.join().unwrap();
    if discover {
        assert_eq!(s.stats().discovery_answered.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}

#[test]
fn exchange_plain_with_crc() {
    exchange(EthConfig::default(), false);
}

#[test]
fn exchange_ring_without_crc_and_discovery() {
    exchange(EthConfig { rx_ring: true, checksum: false, ..EthConfig::default() }, true);
}

#[test]
fn exchange_ring_with_crc() {
    exchange(EthConfig { rx_ring: true, ..EthConfig::default() }, false);
}

#[test]
fn corrupted_frames_are_dropped_and_counted() {
    let Some(h) = common::hosts(1500) else { return };
    for ring in [false, true] {
        let cfg = EthConfig { rx_ring: ring, ..EthConfig::default() };
        let iface = h.a.iface.clone();
        let server = common::join(h.a.spawn(move || EthSocket::open(&iface, cfg).unwrap()), 5);
        let (a_mac, iface_b) = (h.a.mac, h.b.iface.clone());
        let b_mac = h.b.mac;
        common::join(
            h.b.spawn(move || {
                let c = EthSocket::open(&iface_b, cfg).unwrap();
                // A good frame, built by hand, then the same frame with one payload bit flipped,
                // then one with the checksum flag cleared (checksums are required).
                let payload = common::pattern(200, 7);
                let hdr = frame::header(a_mac, b_mac, FrameType::Data, true, payload.len() as u16);
                let crc = frame::checksum(&hdr[14..], &[&payload]);
                let mut good = hdr.to_vec();
                good.extend_from_slice(&payload);
                good.extend_from_slice(&crc.to_le_bytes());
                let mut flipped = good.clone();
                flipped[60] ^= 0x04;
                let mut unflagged = good.clone();
                unflagged[15] = 0;
                c.send_raw_frame(&flipped).unwrap();
                c.send_raw_frame(&unflagged).unwrap();
                c.send_raw_frame(&good).unwrap();
            }),
            5,
        );
        let mut s = server;
        let mut buf = vec![0u8; s.max_payload()];
        let mut spin = Spinner::new(SpinPolicy::Block);
        let (n, src) = s.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().expect("good frame lost");
        assert_eq!((n, src), (200, h.b.mac));
        assert_eq!(&buf[..n], &common::pattern(200, 7)[..]);
        assert_eq!(s.stats().rx_bad_crc.load(std::sync::atomic::Ordering::Relaxed), 2, "ring={ring}");
        assert_eq!(s.try_recv_from(&mut buf).unwrap(), None);
    }
}

#[test]
fn slot_filter_delivers_only_its_slot() {
    let Some(h) = common::hosts(1500) else { return };
    let (iface_a, b_mac) = (h.a.iface.clone(), h.b.mac);
    let sockets = common::join(
        h.a.spawn(move || {
            let f = |slot| EthConfig { filter: Filter { slot: Some(slot), peer: Some(b_mac) }, ..EthConfig::default() };
            (EthSocket::open(&iface_a, f(1)).unwrap(), EthSocket::open(&iface_a, f(0x0302)).unwrap())
        }),
        5,
    );
    let (iface_b, a_mac) = (h.b.iface.clone(), h.a.mac);
    common::join(
        h.b.spawn(move || {
            let c = EthSocket::open(&iface_b, EthConfig::default()).unwrap();
            for slot in [0x0302u16, 1, 9, 0x0203] {
                let mut head = Header::new(Kind::Call);
                head.slot = slot;
                let head = head.to_bytes();
                c.send_to(a_mac, &head, b"body").unwrap();
            }
        }),
        5,
    );
    let (mut s1, mut s2) = sockets;
    let mut buf = vec![0u8; s1.max_payload()];
    let mut spin = Spinner::new(SpinPolicy::Block);
    let (n, src) = s1.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().unwrap();
    assert_eq!((n, src, HeaderView::slot_of(&buf[..n])), (36, b_mac, Some(1)));
    let (n, _) = s2.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().unwrap();
    assert_eq!(HeaderView::slot_of(&buf[..n]), Some(0x0302));
    // Give any wrongly admitted frame time to arrive, then check none did.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(s1.try_recv_from(&mut buf).unwrap(), None);
    assert_eq!(s2.try_recv_from(&mut buf).unwrap(), None);
    let _ = Mac::BROADCAST;
}

#[test]
fn errors_name_the_remedy() {
    let e = EthSocket::open("nosuchif0", EthConfig::default()).err().unwrap();
    assert!(matches!(e, lowlat_eth::Error::NoInterface { .. }), "{e}");
    let Some(h) = common::hosts(68) else { return };
    let iface = h.a.iface.clone();
    let e = common::join(h.a.spawn(move || EthSocket::open(&iface, EthConfig::default()).err().unwrap()), 5);
    assert!(matches!(e, lowlat_eth::Error::MtuTooSmall { mtu: 68, .. }), "{e}");
    assert!(e.to_string().contains("mtu 72"), "{e}");
}

#[test]
fn discovery_without_server_is_a_typed_error() {
    let Some(h) = common::hosts(1500) else { return };
    let iface = h.b.iface.clone();
    let e = common::join(
        h.b.spawn(move || {
            EthSocket::open(&iface, EthConfig::default()).unwrap().discover(3, Duration::from_millis(20)).err().unwrap()
        }),
        5,
    );
    assert!(matches!(e, lowlat_eth::Error::NoPeer { tries: 3, .. }), "{e}");
}
