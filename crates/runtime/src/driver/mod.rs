//! Drivers: how the protocol engine meets each transport.
//!
//! A client opens one [`ClientChannel`] per call slot, so the threads sharing a binding never
//! share a socket (no lock, no demultiplexing: each thread waits on its own descriptor). A server
//! endpoint is one [`ServerTransport`] driven by one thread that runs the engine and the
//! procedures (see `crate::server`).
//!
//! Adding a transport: a file here with a `ClientChannel` and a `ServerTransport`, and an arm in
//! [`open_channel`] and [`open_server`].

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use lowlat_proto::HEADER_LEN;

use crate::{ClientConfig, Endpoint, Error, ServerConfig};

pub(crate) mod eth;
pub(crate) mod onc;
pub(crate) mod shm;
pub(crate) mod tcp;
pub(crate) mod udp;
pub(crate) mod xdp;

/// One call slot's path to the server.
pub(crate) trait ClientChannel: Send {
    /// Sends one frame: `head` then `body`.
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()>;
    /// Receives one frame without blocking into `buf` (which it may grow) or, for a transport
    /// that keeps frames where they arrived, holds it there; returns its length. Read it with
    /// [`received`](Self::received).
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>>;
    /// The frame of `len` bytes the last `try_recv` reported (valid until the next send or
    /// receive on this channel).
    fn received<'a>(&'a self, buf: &'a [u8], len: usize) -> &'a [u8] {
        &buf[..len]
    }
    /// Sleeps until a frame may be ready or the timeout passes.
    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()>;
    /// Largest frame (header + body) this channel carries in one piece.
    fn max_frame(&self) -> usize;
    /// Whether the transport delivers every frame, in order (no retransmission needed).
    fn reliable(&self) -> bool;
}

/// What a server transport received.
pub(crate) enum Received<A> {
    /// A frame of `len` bytes, in the buffer given.
    Frame { len: usize, from: A },
    /// A peer's connection closed.
    Closed(A),
}

/// Where the protocol engine's frames go while a received frame is being served.
pub(crate) type Sink<'a, T> = dyn FnMut(&<T as ServerTransport>::Addr, &[u8; HEADER_LEN], &[u8]) + 'a;

/// One server endpoint's transport.
pub(crate) trait ServerTransport: Send {
    type Addr: Copy + Eq + Send + std::fmt::Debug;
    /// Reports the next frame, received into `buf` or, for a transport that keeps frames where
    /// they arrived, held there for [`with_frame`](Self::with_frame).
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Received<Self::Addr>>>;
    /// Runs `f` on the frame `try_recv` just reported from `from`, with a sink for frames to
    /// send in answer. Over shared memory the frame is read where it lies in the call ring and
    /// an answer to `from` is written straight into its result ring.
    fn with_frame(&mut self, buf: &[u8], len: usize, _from: Self::Addr, f: impl FnOnce(&[u8], &mut Sink<'_, Self>)) {
        f(&buf[..len], &mut |to: &Self::Addr, h: &[u8; HEADER_LEN], b: &[u8]| self.send(to, h, b))
    }
    fn send(&mut self, to: &Self::Addr, head: &[u8], body: &[u8]);
    /// Sleeps until a frame may be ready, `doorbell` is readable, or the timeout passes.
    fn block(&mut self, doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()>;
    fn max_frame(&self) -> usize;
    /// The URI clients should use (with the real port when 0 was asked for).
    fn local_uri(&self) -> String;
}

/// Opens a channel to the server at `endpoint`.
pub(crate) fn open_channel(
    endpoint: &Endpoint,
    uri: &str,
    cfg: &ClientConfig,
) -> Result<Box<dyn ClientChannel>, Error> {
    match endpoint {
        Endpoint::Udp { host_port } => Ok(Box::new(udp::UdpClient::connect(uri, host_port)?)),
        Endpoint::Tcp { host_port } => Ok(Box::new(tcp::TcpClient::connect(uri, host_port, cfg)?)),
        Endpoint::Shm { path } => Ok(Box::new(shm::ShmClient::connect(uri, path, cfg)?)),
        Endpoint::Eth { iface, peer } => Ok(Box::new(eth::EthClient::connect(uri, iface, *peer, cfg)?)),
        Endpoint::Xdp { iface, peer } => Ok(Box::new(xdp::XdpClient::connect(uri, iface, *peer, cfg)?)),
        other => Err(unsupported(uri, other)),
    }
}

/// A transport serving `endpoint`, handed to a serving thread.
pub(crate) enum AnyServer {
    Udp(udp::UdpServer),
    Tcp(tcp::TcpServer),
    Shm(Box<shm::ShmServerTransport>),
    Eth(eth::FrameServer<lowlat_eth::EthSocket>),
    Xdp(Box<eth::FrameServer<lowlat_eth::XdpSocket>>),
}

pub(crate) fn open_server(
    endpoint: &Endpoint,
    uri: &str,
    cfg: &ServerConfig,
    doorbell: RawFd,
) -> Result<AnyServer, Error> {
    match endpoint {
        Endpoint::Udp { host_port } => Ok(AnyServer::Udp(udp::UdpServer::bind(uri, host_port)?)),
        Endpoint::Tcp { host_port } => Ok(AnyServer::Tcp(tcp::TcpServer::bind(uri, host_port, cfg, doorbell)?)),
        Endpoint::Shm { path } => {
            Ok(AnyServer::Shm(Box::new(shm::ShmServerTransport::bind(uri, path, cfg, doorbell)?)))
        }
        Endpoint::Eth { iface, .. } => {
            Ok(AnyServer::Eth(eth::FrameServer::<lowlat_eth::EthSocket>::bind(uri, iface, cfg)?))
        }
        Endpoint::Xdp { iface, .. } => {
            Ok(AnyServer::Xdp(Box::new(eth::FrameServer::<lowlat_eth::XdpSocket>::bind(uri, iface, cfg)?)))
        }
        other => Err(unsupported(uri, other)),
    }
}

fn unsupported(uri: &str, e: &Endpoint) -> Error {
    Error::Unsupported {
        uri: uri.to_string(),
        scheme: e.scheme().to_string(),
        reason: "this transport is not built into this version of lowlat".to_string(),
    }
}
