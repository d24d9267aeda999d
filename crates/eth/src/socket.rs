//! What eth:// and xdp:// sockets have in common: a datagram-like socket of lowlat frames.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use lowlat_wait::Spinner;

use crate::error::{Error, Result};
use crate::frame::FrameType;
use crate::ifinfo::IfInfo;
use crate::packet::{EthConfig, EthSocket, Stats};
use crate::xdp::{XdpConfig, XdpSocket};
use crate::Mac;
use lowlat_addr::Endpoint;

/// A socket that sends and receives lowlat frames on one link.
pub trait FrameSocket: Send {
    /// Sends one frame of `kind` to `dst`, its payload `head` then `body`.
    fn send_kind(&mut self, dst: Mac, kind: FrameType, head: &[u8], body: &[u8]) -> Result<()>;
    /// The next valid DATA or PING payload, without blocking.
    fn try_recv_from(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Mac)>>;
    /// The descriptor that polls readable when a frame may be waiting.
    fn raw_fd(&self) -> RawFd;
    /// The largest `head.len() + body.len()` one frame carries, in bytes.
    fn max_payload(&self) -> usize;
    /// The interface's MAC: this socket's address.
    fn mac(&self) -> Mac;
    /// The interface the socket is bound to.
    fn iface(&self) -> &IfInfo;
    /// Its counters.
    fn stats(&self) -> &Stats;
    /// Finds the server by broadcast.
    fn discover(&mut self, tries: u32, interval: Duration) -> Result<Mac>;

    /// Sends one DATA frame.
    fn send_to(&mut self, dst: Mac, head: &[u8], body: &[u8]) -> Result<()> {
        self.send_kind(dst, FrameType::Data, head, body)
    }

    /// Spin-then-block receive until `deadline`; None on timeout.
    fn recv_from(
        &mut self,
        buf: &mut [u8],
        spinner: &mut Spinner,
        deadline: Option<Instant>,
    ) -> Result<Option<(usize, Mac)>> {
        let fd = self.raw_fd();
        spinner.wait(
            deadline,
            || self.try_recv_from(buf),
            |t| lowlat_sys::poll_readable(&[fd], t).map(|_| ()).map_err(|e| Error::io("waiting for a frame", e)),
        )
    }
}

impl FrameSocket for EthSocket {
    fn send_kind(&mut self, dst: Mac, kind: FrameType, head: &[u8], body: &[u8]) -> Result<()> {
        EthSocket::send_kind(self, dst, kind, head, body)
    }
    fn try_recv_from(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Mac)>> {
        EthSocket::try_recv_from(self, buf)
    }
    fn raw_fd(&self) -> RawFd {
        EthSocket::raw_fd(self)
    }
    fn max_payload(&self) -> usize {
        EthSocket::max_payload(self)
    }
    fn mac(&self) -> Mac {
        EthSocket::mac(self)
    }
    fn iface(&self) -> &IfInfo {
        EthSocket::iface(self)
    }
    fn stats(&self) -> &Stats {
        EthSocket::stats(self)
    }
    fn discover(&mut self, tries: u32, interval: Duration) -> Result<Mac> {
        EthSocket::discover(self, tries, interval)
    }
}

impl FrameSocket for XdpSocket {
    fn send_kind(&mut self, dst: Mac, kind: FrameType, head: &[u8], body: &[u8]) -> Result<()> {
        XdpSocket::send_kind(self, dst, kind, head, body)
    }
    fn try_recv_from(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Mac)>> {
        XdpSocket::try_recv_from(self, buf)
    }
    fn raw_fd(&self) -> RawFd {
        XdpSocket::raw_fd(self)
    }
    fn max_payload(&self) -> usize {
        XdpSocket::max_payload(self)
    }
    fn mac(&self) -> Mac {
        XdpSocket::mac(self)
    }
    fn iface(&self) -> &IfInfo {
        XdpSocket::iface(self)
    }
    fn stats(&self) -> &Stats {
        XdpSocket::stats(self)
    }
    fn discover(&mut self, tries: u32, interval: Duration) -> Result<Mac> {
        XdpSocket::discover(self, tries, interval)
    }
}

/// Options shared by both schemes when opening from an [`Endpoint`].
#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    /// Append a CRC32C to every frame and require one on every frame received: both ends must
    /// agree.
    pub checksum: bool,
    /// eth:// only: receive through a PACKET_MMAP ring.
    pub rx_ring: bool,
    /// Answer discovery (servers).
    pub answer_discovery: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { checksum: true, rx_ring: false, answer_discovery: false }
    }
}

/// Opens the socket an `eth://` or `xdp://` endpoint names (in the calling thread's network
/// namespace).
pub fn open(ep: &Endpoint, o: OpenOptions) -> Result<Box<dyn FrameSocket>> {
    let Some((iface, _)) = ep.ethernet() else {
        return Err(Error::BadUri {
            uri: ep.to_string(),
            why: "expected eth://IFACE[/PEER-MAC] or xdp://IFACE[/PEER-MAC]",
        });
    };
    Ok(if matches!(ep, Endpoint::Xdp { .. }) {
        Box::new(XdpSocket::open(
            iface,
            XdpConfig { checksum: o.checksum, answer_discovery: o.answer_discovery, ..XdpConfig::default() },
        )?)
    } else {
        Box::new(EthSocket::open(
            iface,
            EthConfig {
                checksum: o.checksum,
                rx_ring: o.rx_ring,
                answer_discovery: o.answer_discovery,
                ..EthConfig::default()
            },
        )?)
    })
}
