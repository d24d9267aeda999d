//! xdp:// between two network namespaces.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lowlat_eth::bpf::XdpMode;
use lowlat_eth::{EthConfig, EthSocket, FrameSocket, XdpConfig, XdpSocket};
use lowlat_wait::{SpinPolicy, Spinner};

fn xdp_exchange(mode: Option<XdpMode>, discover: bool) {
    let Some(h) = common::hosts(1500) else { return };
    let cfg = XdpConfig { mode, ..XdpConfig::default() };
    let sizes = [1usize, 32, 1024, 1400];
    let iface_a = h.a.iface.clone();
    let server = common::join(
        h.a.spawn(move || XdpSocket::open(&iface_a, XdpConfig { answer_discovery: true, ..cfg }).unwrap()),
        5,
    );
    eprintln!("server: {:?}, zero-copy {}", server.xdp_mode(), server.zero_copy());
    let n_msgs = sizes.len() + 1;
    let server = std::thread::spawn(move || {
        let mut s = server;
        let mut buf = vec![0u8; s.max_payload()];
        let mut spin = Spinner::new(SpinPolicy::Block);
        for _ in 0..n_msgs {
            let (len, src) =
                s.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().expect("server timed out");
            s.send_to(src, &buf[..len], &[]).unwrap();
        }
        s
    });
    let (iface_b, a_mac) = (h.b.iface.clone(), h.a.mac);
    let client = h.b.spawn(move || {
        let mut c = XdpSocket::open(&iface_b, cfg).unwrap();
        let peer = if discover { c.discover(5, Duration::from_millis(200)).unwrap() } else { a_mac };
        assert_eq!(peer, a_mac);
        let max = c.max_payload();
        let mut buf = vec![0u8; max];
        let mut spin = Spinner::new(SpinPolicy::Budget(Duration::from_micros(50)));
        for (i, &len) in sizes.iter().chain(std::iter::once(&max)).enumerate() {
            let msg = common::pattern(len, i as u8);
            c.send_to(peer, &msg[..len / 2], &msg[len / 2..]).unwrap();
            let (n, src) = c.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap().expect("no echo");
            assert_eq!((src, &buf[..n]), (peer, &msg[..]), "payload of {len} bytes");
        }
        c.stats().rx_bad_crc.load(Ordering::Relaxed)
    });
    assert_eq!(common::join(client, 10), 0);
    server.join().unwrap();
}

#[test]
fn exchange_generic_mode() {
    xdp_exchange(Some(XdpMode::Generic), false);
}

#[test]
fn exchange_best_mode_with_discovery() {
    xdp_exchange(None, true);
}

#[test]
fn xdp_and_eth_interoperate_and_udp_keeps_flowing() {
    let Some(h) = common::hosts(1500) else { return };
    // xdp on a, eth on b: the same frames either way.
    let iface_a = h.a.iface.clone();
    let mut x = common::join(h.a.spawn(move || XdpSocket::open(&iface_a, XdpConfig::default()).unwrap()), 5);
    let (iface_b, a_mac, b_mac) = (h.b.iface.clone(), h.a.mac, h.b.mac);
    let mut e = common::join(h.b.spawn(move || EthSocket::open(&iface_b, EthConfig::default()).unwrap()), 5);
    let mut buf = vec![0u8; x.max_payload()];
    let mut spin = Spinner::new(SpinPolicy::Block);
    e.send_to(a_mac, b"hello", b" xdp").unwrap();
    assert_eq!(x.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap(), Some((9, b_mac)));
    assert_eq!(&buf[..9], b"hello xdp");
    x.send_to(b_mac, b"hello eth", &[]).unwrap();
    assert_eq!(e.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap(), Some((9, a_mac)));

    // With the XDP program attached on a, IPv4/UDP (and ARP) still reach a's kernel stack.
    let (addr_a, addr_b) = (h.a.addr, h.b.addr);
    let udp_server = common::join(h.a.spawn(move || UdpSocket::bind((addr_a, 0)).unwrap()), 5);
    let port = udp_server.local_addr().unwrap().port();
    let udp_client = common::join(h.b.spawn(move || UdpSocket::bind((addr_b, 0)).unwrap()), 5);
    for s in [&udp_server, &udp_client] {
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    }
    udp_client.send_to(b"ping over udp", (addr_a, port)).unwrap();
    let mut ub = [0u8; 64];
    let (n, from) = udp_server.recv_from(&mut ub).expect("UDP did not reach the kernel while XDP was attached");
    assert_eq!(&ub[..n], b"ping over udp");
    udp_server.send_to(b"pong", from).unwrap();
    let (n, _) = udp_client.recv_from(&mut ub).expect("UDP reply lost");
    assert_eq!(&ub[..n], b"pong");
    // ...and lowlat frames still go to the socket, not the stack.
    e.send_to(a_mac, b"after udp", &[]).unwrap();
    assert_eq!(x.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap(), Some((9, b_mac)));
}

#[test]
fn corrupted_frames_to_xdp_are_dropped_and_counted() {
    use lowlat_eth::frame::{self, FrameType};
    let Some(h) = common::hosts(1500) else { return };
    let iface_a = h.a.iface.clone();
    let mut x = common::join(h.a.spawn(move || XdpSocket::open(&iface_a, XdpConfig::default()).unwrap()), 5);
    let (iface_b, a_mac, b_mac) = (h.b.iface.clone(), h.a.mac, h.b.mac);
    common::join(
        h.b.spawn(move || {
            let e = EthSocket::open(&iface_b, EthConfig::default()).unwrap();
            let payload = common::pattern(500, 3);
            let hdr = frame::header(a_mac, b_mac, FrameType::Data, true, payload.len() as u16);
            let crc = frame::checksum(&hdr[14..], &[&payload]);
            let mut good = hdr.to_vec();
            good.extend_from_slice(&payload);
            good.extend_from_slice(&crc.to_le_bytes());
            for i in [20usize, 300, good.len() - 1] {
                let mut bad = good.clone();
                bad[i] ^= 1;
                e.send_raw_frame(&bad).unwrap();
            }
            e.send_raw_frame(&good).unwrap();
        }),
        5,
    );
    let mut buf = vec![0u8; x.max_payload()];
    let mut spin = Spinner::new(SpinPolicy::Block);
    assert_eq!(x.recv_from(&mut buf, &mut spin, Some(common::deadline(5))).unwrap(), Some((500, b_mac)));
    assert_eq!(x.stats().rx_bad_crc.load(Ordering::Relaxed), 3);
}
