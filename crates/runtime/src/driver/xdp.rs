//! lowlat over AF_XDP (`xdp://IFACE[/PEER-MAC]`): lowlat's XDP program steers frames of lowlat's
//! EtherType into one AF_XDP socket per interface queue. An interface queue takes only one such
//! socket, so a client's slots share it through `lowlat_eth::shared` (a mutex and a mailbox per
//! slot); a server endpoint owns its socket. As over eth://, the engine retransmits.
//!
//! The XDP program is attached with a bpf link when the socket opens and detached when the last
//! channel (client) or the endpoint (server) closes, or when the process dies.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use lowlat_eth::shared::{SharedXdp, XdpHandle};
use lowlat_eth::{Mac, XdpConfig, XdpSocket};
use lowlat_transport::sys::poll_readable;

use super::eth::{discovery_tries, eth_error, peer_mac, slot_of, to_io};
use super::{ClientChannel, Received, ServerTransport};
use crate::{ClientConfig, Error, ServerConfig};

pub(crate) struct XdpClient {
    handle: XdpHandle,
    peer: Mac,
}

impl XdpClient {
    pub fn connect(uri: &str, iface: &str, peer: Option<[u8; 6]>, cfg: &ClientConfig) -> Result<XdpClient, Error> {
        let err = |e| eth_error(uri, "xdp", e);
        let shared = SharedXdp::get_or_open(iface, XdpConfig { checksum: cfg.eth_checksum, ..XdpConfig::default() })
            .map_err(err)?;
        let (tries, interval) = discovery_tries(cfg);
        let peer = peer_mac(iface, peer, || shared.discover(tries, interval)).map_err(err)?;
        Ok(XdpClient { handle: shared.handle(), peer })
    }
}

impl ClientChannel for XdpClient {
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.handle.send_to(self.peer, head, body).map_err(to_io)
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        let max = self.handle.shared().max_payload();
        if buf.len() < max {
            buf.resize(max, 0);
        }
        loop {
            let Some((n, src)) = self.handle.try_recv_from(buf).map_err(to_io)? else { return Ok(None) };
            if src == self.peer && slot_of(&buf[..n]).is_some() {
                return Ok(Some(n));
            }
        }
    }

    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.handle.block(timeout).map_err(to_io)
    }

    fn max_frame(&self) -> usize {
        self.handle.shared().max_payload()
    }

    fn reliable(&self) -> bool {
        false
    }
}

pub(crate) struct XdpServer {
    sock: XdpSocket,
}

impl XdpServer {
    pub fn bind(uri: &str, iface: &str, cfg: &ServerConfig) -> Result<XdpServer, Error> {
        let cfg = XdpConfig { answer_discovery: true, checksum: cfg.eth_checksum, ..XdpConfig::default() };
        Ok(XdpServer { sock: XdpSocket::open(iface, cfg).map_err(|e| eth_error(uri, "xdp", e))? })
    }
}

impl ServerTransport for XdpServer {
    type Addr = Mac;

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Received<Mac>>> {
        let max = self.sock.max_payload();
        if buf.len() < max {
            buf.resize(max, 0);
        }
        Ok(self.sock.try_recv_from(buf).map_err(to_io)?.map(|(len, from)| Received::Frame { len, from }))
    }

    fn send(&mut self, to: &Mac, head: &[u8], body: &[u8]) {
        // A failed send is a lost frame; the client's retransmission recovers.
        let _ = self.sock.send_to(*to, head, body);
    }

    fn block(&mut self, doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        poll_readable(&[self.sock.raw_fd(), doorbell], timeout).map(|_| ())
    }

    fn max_frame(&self) -> usize {
        self.sock.max_payload()
    }

    fn local_uri(&self) -> String {
        format!("xdp://{}/{}", self.sock.iface().name, self.sock.mac())
    }
}
