//! What a binding costs an honest client on the wire: the bind exchange alone (over datagrams:
//! the bind, the server's cookie, the bind again, the grant), timed from the first send to the
//! grant, beside a null call's round trip on a session it bound, both busy-polling, in one run.
//! Driven at the protocol level (`lowlat-proto`'s engines over a UDP socket or an AF_PACKET
//! socket), so that opening sockets and the client's threads are not counted.
//!
//! `cargo run --release -p lowlat-lab --example bind_time URI [BINDS] [PSK-FILE]`
//!
//! URI: `udp://HOST:PORT` or `eth://IFACE/SERVER-MAC` (in the client's namespace). Serve first
//! (`lowlat serve URI`, with `--psk-file` to match). Prints p50 and p99 of the bind and of the
//! null call, and the bind's p50 in null-call round trips (2 with the cookie round).

use std::time::{Duration, Instant};

use lowlat_proto::wire::{BindRequest, ByteOrder, PROTOCOL_VERSION};
use lowlat_proto::{Binder, ClientEngineConfig, ClientSlot, Outcome, Psk};

/// A datagram path to the server.
enum Path {
    Udp(lowlat_transport::udp::UdpChannel),
    Eth(lowlat_eth::EthSocket, lowlat_eth::Mac),
}

impl Path {
    fn open(uri: &str) -> Result<Path, String> {
        match uri.parse::<lowlat::Endpoint>().map_err(|e| e.to_string())? {
            lowlat::Endpoint::Udp { host_port } => {
                let addr = lowlat_transport::udp::resolve(&host_port).map_err(|e| e.to_string())?;
                let ch = lowlat_transport::udp::UdpChannel::connect(addr).map_err(|e| e.to_string())?;
                Ok(Path::Udp(ch.with_checksum(true)))
            }
            lowlat::Endpoint::Eth { iface, peer: Some(mac) } => {
                let sock =
                    lowlat_eth::EthSocket::open(&iface, lowlat_eth::EthConfig::default()).map_err(|e| e.to_string())?;
                Ok(Path::Eth(sock, mac))
            }
            _ => Err(format!("{uri}: give udp://HOST:PORT or eth://IFACE/SERVER-MAC")),
        }
    }

    fn send(&mut self, head: &[u8], body: &[u8]) {
        let _ = match self {
            Path::Udp(ch) => ch.send(head, body).map_err(|e| e.to_string()),
            Path::Eth(s, peer) => s.send_to(*peer, head, body).map_err(|e| e.to_string()),
        };
    }

    /// The next frame, busy-polling until `deadline`.
    fn recv<'a>(&mut self, buf: &'a mut [u8], deadline: Instant) -> Result<&'a [u8], String> {
        loop {
            let got = match self {
                Path::Udp(ch) => ch.try_recv(buf).map_err(|e| e.to_string())?,
                Path::Eth(s, _) => s.try_recv_from(buf).map_err(|e| e.to_string())?.map(|(n, _)| n),
            };
            if let Some(n) = got {
                return Ok(&buf[..n]);
            }
            if Instant::now() > deadline {
                return Err("no answer within a second: is `lowlat serve` running there?".into());
            }
            std::hint::spin_loop();
        }
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let uri = args.next().ok_or("usage: bind_time URI [BINDS] [PSK-FILE]")?;
    let binds: u64 = args.next().map_or(Ok(2000), |s| s.parse()).map_err(|e| format!("BINDS: {e}"))?;
    let psk: Option<Psk> = args.next().map(lowlat::read_psk_file).transpose().map_err(|e| e.to_string())?;
    let mut path = Path::open(&uri)?;
    let mut buf = vec![0u8; 65536];
    let cfg = ClientEngineConfig { initial_rto: Duration::from_millis(200), ..ClientEngineConfig::default() };
    let (mut bind_us, mut call_us) = (Vec::new(), Vec::new());
    for i in 0..binds {
        let req = BindRequest {
            program: lowlat_lab::interface::PROGRAM,
            version: 1,
            proto_min: PROTOCOL_VERSION,
            proto_max: PROTOCOL_VERSION,
            byte_order: ByteOrder::host(),
            flags: 0,
            max_message: 1 << 20,
            max_frame: 1400,
            slots: 1,
            window: 8,
            nonce: (std::process::id() as u64) << 32 | i,
        };
        let t = Instant::now();
        let deadline = t + Duration::from_secs(1);
        let mut binder = Binder::new(req, &cfg, t, deadline).with_key(psk.clone());
        let mut out = Vec::new();
        binder.start(t, &mut |h, b| out.push([h, b].concat()));
        let bound = loop {
            for f in out.drain(..) {
                path.send(&f[..32], &f[32..]);
            }
            let frame = path.recv(&mut buf, deadline)?;
            if let Some(r) = binder.handle(frame, Instant::now(), &mut |h, b| out.push([h, b].concat())) {
                break r.map_err(|e| format!("bind {i}: {e:?}"))?;
            }
        };
        bind_us.push(t.elapsed().as_secs_f64() * 1e6);
        // A null call on the new session (which also spares it the server's reclaiming).
        let mut slot = ClientSlot::new(bound.session, 0, cfg).with_keys(bound.keys);
        let t = Instant::now();
        slot.start(lowlat_lab::interface::NULL, t, t + Duration::from_secs(1), &mut |h, b| out.push([h, b].concat()))
            .map_err(|e| format!("{e:?}"))?;
        loop {
            for f in out.drain(..) {
                path.send(&f[..32], &f[32..]);
            }
            let frame = path.recv(&mut buf, t + Duration::from_secs(1))?;
            match slot.handle(frame, Instant::now, &mut |h, b| out.push([h, b].concat())) {
                Some(Outcome::Reply(_)) => break,
                Some(Outcome::Failed(e)) => return Err(format!("null call: {e:?}")),
                Some(Outcome::Remote { code, message }) => return Err(format!("null call: {code:?}: {message:?}")),
                None => {}
            }
        }
        call_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (b50, b99) = (percentile(&mut bind_us, 0.5), percentile(&mut bind_us, 0.99));
    let (c50, c99) = (percentile(&mut call_us, 0.5), percentile(&mut call_us, 0.99));
    println!(
        "{uri}: bind p50 {b50:.2} µs p99 {b99:.2} µs; null call p50 {c50:.2} µs p99 {c99:.2} µs; bind = {:.2} null calls",
        b50 / c50
    );
    Ok(())
}
