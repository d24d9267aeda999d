//! lowlat over raw Ethernet frames (`eth://IFACE[/PEER-MAC]`, AF_PACKET): one socket per client
//! slot, which the kernel filters down to that slot's frames from the server; one socket per
//! server endpoint. Frames may be lost or corrupted (dropped by their CRC32C), so, as over UDP,
//! the protocol engine retransmits.
//!
//! A channel learns its slot from the first frame it sends and narrows its kernel filter to
//! it; the filter follows if the channel later sends for another slot (a rebind sends slot 0's
//! bind request). Without a PEER-MAC the first channel finds the server by broadcast discovery
//! and the others reuse the answer. Sockets belong to the network namespace of the thread that
//! opens them: a client's calling threads must live in the namespace of the interface.

use std::io;
use std::os::fd::RawFd;
use std::sync::Mutex;
use std::time::Duration;

use lowlat_eth::{EthConfig, EthSocket, Filter, FrameSocket, Mac, XdpConfig, XdpSocket};
use lowlat_proto::wire::HeaderView;
use lowlat_sys::poll_readable;

use super::{serve_received, ClientChannel, FrameHandler, Received, Served, ServerTransport, WakeOn};
use crate::stats::EndpointStats;
use crate::{ClientConfig, Error, ServerConfig};

/// The slot of a lowlat frame, which its channel's kernel filter follows.
pub(super) fn slot_of(frame: &[u8]) -> Option<u16> {
    HeaderView::slot_of(frame)
}

/// Maps the raw transport's errors onto the runtime's, keeping their advice.
pub(super) fn eth_error(uri: &str, scheme: &str, e: lowlat_eth::Error) -> Error {
    use lowlat_eth::Error as E;
    match e {
        E::NoPeer { .. } => Error::ServerNotRunning { uri: uri.to_string(), detail: e.to_string() },
        E::NoInterface { .. }
        | E::Privilege { .. }
        | E::MtuTooSmall { .. }
        | E::XdpAttach { .. }
        | E::Verifier { .. } => {
            Error::Unsupported { uri: uri.to_string(), scheme: scheme.to_string(), reason: e.to_string() }
        }
        other => Error::io(format!("{uri}: open"), io::Error::other(other)),
    }
}

pub(super) fn to_io(e: lowlat_eth::Error) -> io::Error {
    match e {
        lowlat_eth::Error::Io { source, .. } => source,
        other => io::Error::other(other),
    }
}

/// Servers found by discovery, by (network namespace, interface), for the sibling channels.
static DISCOVERED: Mutex<Vec<((u64, String), Mac)>> = Mutex::new(Vec::new());

/// The server's MAC: given, found earlier on this interface, or discovered now with `find`.
pub(super) fn peer_mac(
    iface: &str,
    given: Option<Mac>,
    find: impl FnOnce() -> Result<Mac, lowlat_eth::Error>,
) -> Result<Mac, lowlat_eth::Error> {
    if let Some(m) = given {
        return Ok(m);
    }
    let key = (lowlat_sys::process::net_namespace_id(), iface.to_string());
    let mut found = DISCOVERED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, m)) = found.iter().find(|(k, _)| *k == key) {
        return Ok(*m);
    }
    let m = find()?;
    found.push((key, m));
    Ok(m)
}

/// Discovery rounds within the bind timeout.
pub(super) fn discovery_tries(cfg: &ClientConfig) -> (u32, Duration) {
    let interval = Duration::from_millis(100);
    ((cfg.bind_timeout.as_millis() / interval.as_millis()).clamp(1, 100) as u32, interval)
}

pub(crate) struct EthClient {
    sock: EthSocket,
    peer: Mac,
    slot: Option<u16>,
}

impl EthClient {
    pub fn connect(uri: &str, iface: &str, peer: Option<Mac>, cfg: &ClientConfig) -> Result<EthClient, Error> {
        let err = |e| eth_error(uri, "eth", e);
        let mut sock =
            EthSocket::open(iface, EthConfig { checksum: cfg.checksum, ..EthConfig::default() }).map_err(err)?;
        let (tries, interval) = discovery_tries(cfg);
        let peer = peer_mac(iface, peer, || sock.discover(tries, interval)).map_err(err)?;
        sock.set_filter(Filter { slot: None, peer: Some(peer) }).map_err(err)?;
        Ok(EthClient { sock, peer, slot: None })
    }
}

impl ClientChannel for EthClient {
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let slot = slot_of(head);
        if slot.is_some() && slot != self.slot {
            self.sock.set_filter(Filter { slot, peer: Some(self.peer) }).map_err(to_io)?;
            self.slot = slot;
        }
        self.sock.send_to(self.peer, head, body).map_err(to_io)
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        let max = self.sock.max_payload();
        if buf.len() < max {
            buf.resize(max, 0);
        }
        loop {
            let Some((n, src)) = self.sock.try_recv_from(buf).map_err(to_io)? else { return Ok(None) };
            // Frames queued before the filter narrowed to this slot are skipped here.
            if src == self.peer && (self.slot.is_none() || slot_of(&buf[..n]) == self.slot) {
                return Ok(Some(n));
            }
        }
    }

    fn park(&mut self) -> io::Result<WakeOn> {
        Ok(WakeOn::Readable([Some(self.sock.raw_fd()), None]))
    }

    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        poll_readable(&[self.sock.raw_fd()], timeout).map(|_| ())
    }

    fn max_frame(&self) -> usize {
        self.sock.max_payload()
    }

    fn reliable(&self) -> bool {
        false
    }
}

/// A server endpoint on one raw-Ethernet socket: AF_PACKET (`eth://`) or AF_XDP (`xdp://`).
pub(crate) struct FrameServer<S> {
    sock: S,
    scheme: &'static str,
}

impl FrameServer<EthSocket> {
    /// One socket per serving thread (`threads`); several form a `PACKET_FANOUT` group whose
    /// classic-BPF program sends each frame to the thread holding its session
    /// (`lowlat_eth::cbpf::steering`), binds by their nonce, discovery to the first.
    pub fn bind_group(uri: &str, iface: &str, cfg: &ServerConfig, threads: usize) -> Result<Vec<Self>, Error> {
        let cfg = EthConfig { answer_discovery: true, checksum: cfg.checksum, ..EthConfig::default() };
        let err = |e| eth_error(uri, "eth", e);
        let socks =
            (0..threads.max(1)).map(|_| EthSocket::open(iface, cfg).map_err(err)).collect::<Result<Vec<_>, _>>()?;
        if socks.len() > 1 {
            let id = socks[0].start_fanout(&lowlat_eth::cbpf::steering(socks.len() as u16)).map_err(err)?;
            for s in &socks[1..] {
                s.join_fanout(id).map_err(err)?;
            }
        }
        Ok(socks.into_iter().map(|sock| FrameServer { sock, scheme: "eth" }).collect())
    }
}

impl FrameServer<XdpSocket> {
    pub fn bind(uri: &str, iface: &str, cfg: &ServerConfig) -> Result<Self, Error> {
        let cfg = XdpConfig { answer_discovery: true, checksum: cfg.checksum, ..XdpConfig::default() };
        let sock = XdpSocket::open(iface, cfg).map_err(|e| eth_error(uri, "xdp", e))?;
        Ok(FrameServer { sock, scheme: "xdp" })
    }
}

impl<S: FrameSocket> FrameServer<S> {
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Received<Mac>>> {
        let max = self.sock.max_payload();
        if buf.len() < max {
            buf.resize(max, 0);
        }
        Ok(self.sock.try_recv_from(buf).map_err(to_io)?.map(|(len, from)| Received::Frame { len, from }))
    }
}

impl<S: FrameSocket> ServerTransport for FrameServer<S> {
    type Addr = Mac;

    fn serve_next(&mut self, buf: &mut Vec<u8>, h: &mut impl FrameHandler<Mac>) -> Served<Mac> {
        let got = self.try_recv(buf)?;
        Ok(serve_received(self, got, buf, h))
    }

    fn send(&mut self, to: &Mac, head: &[u8], body: &[u8]) {
        // A failed send is a lost frame; the client's retransmission recovers.
        let _ = self.sock.send_to(*to, head, body);
        crate::marks::replied();
    }

    fn block(&mut self, doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        poll_readable(&[self.sock.raw_fd(), doorbell], timeout).map(|_| ())
    }

    fn max_frame(&self) -> usize {
        self.sock.max_payload()
    }

    fn local_uri(&self) -> String {
        format!("{}://{}/{}", self.scheme, self.sock.iface().name, self.sock.mac())
    }

    fn reliable(&self) -> bool {
        false
    }

    /// An Ethernet peer's source is its MAC address.
    fn source(peer: &Mac) -> u128 {
        peer.0.iter().fold(0u128, |s, b| s << 8 | u128::from(*b))
    }

    fn count(&self, into: &mut EndpointStats) {
        let s = self.sock.stats();
        into.checksum_failures += s.rx_bad_crc.load(std::sync::atomic::Ordering::Relaxed);
    }
}
