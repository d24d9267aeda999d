//! UDP: a connected socket per client slot; one socket per server endpoint. Carries lowlat's
//! protocol (`udp://`, each datagram checked end to end by a CRC32C unless the configuration
//! says otherwise) and ONC RPC (`onc+udp://`, as RFC 5531 has it: no checksum of ours) alike: a
//! frame is a datagram.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use lowlat_sys::poll_readable;
use lowlat_transport::udp::{UdpChannel, UdpEndpoint, MAX_DATAGRAM};
use lowlat_transport::Cidr;

use super::{serve_received, ClientChannel, FrameHandler, Received, Served, ServerTransport, WakeOn};
use crate::stats::EndpointStats;
use crate::Error;

pub(crate) struct UdpClient {
    ch: UdpChannel,
}

impl UdpClient {
    pub fn connect(uri: &str, addr: &SocketAddr, checksum: bool) -> Result<UdpClient, Error> {
        let ch = UdpChannel::connect(*addr).map_err(|e| Error::io(format!("{uri}: open UDP socket"), e))?;
        Ok(UdpClient { ch: ch.with_checksum(checksum) })
    }
}

impl ClientChannel for UdpClient {
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.ch.send(head, body)
    }

    /// `ConnectionRefused`: nobody listens at the server's port (an ICMP port-unreachable came
    /// back for a datagram sent earlier).
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        if buf.len() < MAX_DATAGRAM {
            buf.resize(MAX_DATAGRAM, 0);
        }
        self.ch.try_recv(buf)
    }

    fn park(&mut self) -> io::Result<WakeOn> {
        Ok(WakeOn::Readable([Some(self.ch.as_raw_fd()), None]))
    }

    fn ready(&mut self) -> bool {
        poll_readable(&[self.ch.as_raw_fd()], Some(Duration::ZERO)).is_ok_and(|n| n > 0)
    }

    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        poll_readable(&[self.ch.as_raw_fd()], timeout).map(|_| ())
    }

    fn max_frame(&self) -> usize {
        self.ch.max_datagram()
    }

    fn reliable(&self) -> bool {
        false
    }
}

pub(crate) struct UdpServer {
    ep: UdpEndpoint,
    /// The scheme clients use: `udp` or `onc+udp`.
    scheme: &'static str,
}

impl UdpServer {
    pub fn bind(
        uri: &str,
        scheme: &'static str,
        addr: SocketAddr,
        checksum: bool,
        allow: &[Cidr],
    ) -> Result<UdpServer, Error> {
        let ep = UdpEndpoint::bind(addr).map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        Ok(UdpServer { ep: ep.with_checksum(checksum).with_allowlist(allow.to_vec()), scheme })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.ep.local_addr()
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Received<SocketAddr>>> {
        if buf.len() < MAX_DATAGRAM {
            buf.resize(MAX_DATAGRAM, 0);
        }
        Ok(self.ep.try_recv_from(buf)?.map(|(len, from)| Received::Frame { len, from }))
    }
}

impl ServerTransport for UdpServer {
    type Addr = SocketAddr;

    fn serve_next(&mut self, buf: &mut Vec<u8>, h: &mut impl FrameHandler<SocketAddr>) -> Served<SocketAddr> {
        let got = self.try_recv(buf)?;
        Ok(serve_received(self, got, buf, h))
    }

    fn send(&mut self, to: &SocketAddr, head: &[u8], body: &[u8]) {
        // A failed send is a lost datagram; the client's retransmission recovers.
        let _ = self.ep.send_to(to, head, body);
    }

    fn block(&mut self, doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        poll_readable(&[self.ep.as_raw_fd(), doorbell], timeout).map(|_| ())
    }

    fn max_frame(&self) -> usize {
        self.ep.max_datagram()
    }

    fn local_uri(&self) -> String {
        format!("{}://{}", self.scheme, self.ep.local_addr())
    }

    fn reliable(&self) -> bool {
        false
    }

    /// A UDP peer's source is its IP address, whatever its port.
    fn source(peer: &SocketAddr) -> u128 {
        match peer.ip().to_canonical() {
            std::net::IpAddr::V4(a) => u32::from(a) as u128,
            std::net::IpAddr::V6(a) => u128::from(a),
        }
    }

    fn count(&self, into: &mut EndpointStats) {
        into.checksum_failures += self.ep.checksum_failures();
        into.not_allowed += self.ep.not_allowed();
    }
}
