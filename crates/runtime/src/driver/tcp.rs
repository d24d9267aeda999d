//! lowlat over TCP: a connection per client slot; one thread serves every connection of an
//! endpoint. TCP delivers in order, so neither side retransmits and the server keeps no results.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use lowlat_proto::HEADER_LEN;
use lowlat_transport::sys::poll_readable;
use lowlat_transport::tcp::{ConnId, TcpChannel, TcpEndpoint, TcpEvent};
use lowlat_transport::udp::resolve;

use super::{serve_received, ClientChannel, FrameHandler, Received, Served, ServerTransport};
use crate::{ClientConfig, Error, ServerConfig};

pub(crate) struct TcpClient {
    ch: TcpChannel,
    max_frame: usize,
}

impl TcpClient {
    pub fn connect(uri: &str, host_port: &str, cfg: &ClientConfig) -> Result<TcpClient, Error> {
        let addr = resolve(host_port).map_err(|e| Error::InvalidUri { uri: uri.to_string(), reason: e.to_string() })?;
        let max_frame = cfg.max_message + HEADER_LEN;
        let ch = TcpChannel::connect(addr, max_frame, cfg.bind_timeout).map_err(|e| match e.kind() {
            io::ErrorKind::ConnectionRefused => Error::ServerNotRunning { uri: uri.to_string(), detail: e.to_string() },
            _ => Error::io(format!("{uri}: connect"), e),
        })?;
        Ok(TcpClient { ch, max_frame })
    }
}

impl ClientChannel for TcpClient {
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.ch.send(head, body)
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        Ok(self.ch.try_recv(buf)?.map(|()| buf.len()))
    }

    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        poll_readable(&[self.ch.as_raw_fd()], timeout).map(|_| ())
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn reliable(&self) -> bool {
        true
    }
}

pub(crate) struct TcpServer {
    ep: TcpEndpoint,
    max_frame: usize,
}

impl TcpServer {
    pub fn bind(uri: &str, host_port: &str, cfg: &ServerConfig, doorbell: RawFd) -> Result<TcpServer, Error> {
        let addr = resolve(host_port).map_err(|e| Error::InvalidUri { uri: uri.to_string(), reason: e.to_string() })?;
        // Frames carry a whole message (a bind request is far smaller than any maximum).
        let max_frame = cfg.max_message + HEADER_LEN;
        let ep = TcpEndpoint::bind(addr, max_frame).map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        ep.watch(doorbell).map_err(|e| Error::io(format!("{uri}: watch doorbell"), e))?;
        Ok(TcpServer { ep, max_frame })
    }
}

impl TcpServer {
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Received<ConnId>>> {
        Ok(self.ep.try_next(buf)?.map(|ev| match ev {
            TcpEvent::Frame(from) => Received::Frame { len: buf.len(), from },
            TcpEvent::Closed(id) => Received::Closed(id),
        }))
    }
}

impl ServerTransport for TcpServer {
    type Addr = ConnId;

    fn serve_next(&mut self, buf: &mut Vec<u8>, h: &mut impl FrameHandler<ConnId>) -> Served<ConnId> {
        let got = self.try_recv(buf)?;
        Ok(serve_received(self, got, buf, h))
    }

    fn send(&mut self, to: &ConnId, head: &[u8], body: &[u8]) {
        self.ep.send(to, head, body);
    }

    fn block(&mut self, _doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        // The doorbell is in the epoll set (`watch` at bind).
        self.ep.block(timeout)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn local_uri(&self) -> String {
        format!("tcp://{}", self.ep.local_addr())
    }
}
