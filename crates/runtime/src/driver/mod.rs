//! Drivers: how a protocol engine meets each transport.
//!
//! A client opens one [`ClientChannel`] per call slot, so the threads sharing a binding never
//! share a socket (no lock, no demultiplexing: each thread waits on its own descriptor). A server
//! endpoint is one [`ServerTransport`] driven by one thread that runs a protocol's engine and the
//! procedures (`crate::serving`). Both of lowlat's protocols use these drivers: lowlat's own and
//! ONC RPC (over `udp` and `tcp`, the latter with its record marking, [`tcp::RecordMarking`]).
//! Drivers know nothing of either protocol's engine, and nothing of the server above them.
//!
//! Adding a transport: a file here with a `ClientChannel` and a `ServerTransport`; an arm in
//! [`open_channel`] and one in [`open_server`]; the scheme in `lowlat_addr::Endpoint`'s
//! parser; and one line in `tests/conformance.rs` instantiating the conformance suite for it.

use std::hash::Hash;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

use lowlat_onc::rpcbind::Netid;

use crate::stats::EndpointStats;
use crate::{ClientConfig, Endpoint, Error, ServerConfig};

pub(crate) mod eth;
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
    /// What an async call waits for in the reactor (`crate::reactor`) instead of sleeping in
    /// [`block`](Self::block), once its spin found no frame.
    fn park(&mut self) -> io::Result<WakeOn>;
    /// Whether a frame may be there now, looked at without taking it: another async call of the
    /// same client then wakes a parked one at once, without the reactor's hop. False when it
    /// cannot tell cheaply (the reactor still wakes the call).
    fn ready(&mut self) -> bool {
        false
    }
    /// Ends a wait begun by [`park`](Self::park); `timed_out`: the reactor woke the call for
    /// its deadline, not for a descriptor.
    fn unpark(&mut self, _timed_out: bool) -> io::Result<()> {
        Ok(())
    }
    /// Largest frame (header + body) this channel carries in one piece.
    fn max_frame(&self) -> usize;
    /// Whether the transport delivers every frame, in order (no retransmission needed).
    fn reliable(&self) -> bool;
    /// Whether the channel is private to this process and a server that checked its
    /// credentials (shared memory): frames there carry no tags, and no key is sent.
    fn private(&self) -> bool {
        false
    }
}

/// What a frame-receiving transport received.
pub(crate) enum Received<A> {
    /// A frame of `len` bytes, in the buffer given.
    Frame { len: usize, from: A },
    /// A peer's connection closed.
    Closed(A),
}

/// What [`ServerTransport::serve_next`] did.
pub(crate) enum Polled<A> {
    /// Served a frame.
    Served,
    /// A peer's connection closed.
    Closed(A),
}

/// What [`ServerTransport::serve_next`] returns: `None` when nothing was ready.
pub(crate) type Served<A> = io::Result<Option<Polled<A>>>;

/// The serving loop's side of a frame: a protocol engine and the procedures behind it.
pub(crate) trait FrameHandler<A> {
    /// Handles one frame from `from`; frames to send in answer go to `out` (addressed; a
    /// header, then a body, sent as one frame). A
    /// transport that can send from where the frame is built lends that space as `lent` (over
    /// shared memory, the free space of `from`'s result ring, so the procedure writes its result
    /// once, where the client reads it); returns how many bytes of `lent` make the answer to
    /// send from there, header first (0: none).
    fn handle<O: FnMut(&A, &[u8], &[u8])>(&mut self, from: A, frame: &[u8], lent: &mut [u8], out: &mut O) -> usize;
    /// After [`handle`](Self::handle), over a transport that [hands
    /// over](ServerTransport::hands_over) connections: the serving thread of the endpoint that
    /// holds the session the frame named, when that is another than this one. The frame was
    /// left unhandled; the transport hands its connection, with the frame, to that thread, so
    /// that every call of a session reaches the engine holding it.
    fn handed_over(&mut self) -> Option<u16> {
        None
    }
    /// Sends what `handle` could not while it had space lent (call it once that space is given
    /// back; nothing to do after a `handle` without lent space).
    fn flush<O: FnMut(&A, &[u8], &[u8])>(&mut self, out: &mut O);
}

/// One server endpoint's transport.
pub(crate) trait ServerTransport: Send {
    type Addr: Copy + Eq + Hash + Send + std::fmt::Debug + 'static;
    /// Takes the next frame without blocking and hands it to `handler` at once, before
    /// returning (over shared memory, where it lies in the call ring). `buf` is the loop's
    /// receive buffer, for transports that copy frames out.
    fn serve_next(&mut self, buf: &mut Vec<u8>, handler: &mut impl FrameHandler<Self::Addr>) -> Served<Self::Addr>;
    fn send(&mut self, to: &Self::Addr, head: &[u8], body: &[u8]);
    /// After answers sent between two `serve_next` (calls run with the thread's seat lent,
    /// `crate::serving::seats`): a transport that holds answers back to send several at once
    /// sends them now if nothing it received waits to be served. Nothing to do for one that
    /// sends at once.
    fn answered(&mut self) {}
    /// Sleeps until a frame may be ready, `doorbell` is readable, or the timeout passes.
    fn block(&mut self, doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()>;
    fn max_frame(&self) -> usize;
    /// The URI clients should use (with the real port when 0 was asked for).
    fn local_uri(&self) -> String;
    /// Whether it delivers every frame, in order (TCP, shared memory): the server decides from
    /// this, never from what a client says.
    fn reliable(&self) -> bool;
    /// Whether its peers are processes whose credentials were checked, over channels no one
    /// else sees (shared memory): no cookie round, no key, no tags.
    fn private(&self) -> bool {
        false
    }
    /// Whether it hands a connection to another thread of the endpoint when a frame on it names
    /// a session that thread holds ([`FrameHandler::handed_over`]): the stream transports, whose
    /// frames no kernel program steers.
    fn hands_over(&self) -> bool {
        false
    }
    /// The source whose share of sessions a peer's count against (see
    /// `ServerConfig::max_sessions_per_source`).
    fn source(peer: &Self::Addr) -> u128;
    /// Adds the transport's own counters (checksum failures, refused connections, ...).
    fn count(&self, _into: &mut EndpointStats) {}
}

/// Each peer address a source of its own.
pub(crate) fn each_peer<A: Hash>(peer: &A) -> u128 {
    let mut h = std::hash::DefaultHasher::new();
    peer.hash(&mut h);
    std::hash::Hasher::finish(&h) as u128
}

/// [`ServerTransport::serve_next`] for a transport that receives frames into `buf`: hands
/// what it `got` to `handler`, answers going out through the transport's `send`.
pub(crate) fn serve_received<T: ServerTransport>(
    t: &mut T,
    got: Option<Received<T::Addr>>,
    buf: &[u8],
    handler: &mut impl FrameHandler<T::Addr>,
) -> Option<Polled<T::Addr>> {
    match got? {
        Received::Frame { len, from } => {
            crate::marks::collect(true);
            let out = &mut |to: &T::Addr, h: &[u8], b: &[u8]| t.send(to, h, b);
            handler.handle(from, &buf[..len], &mut [], out);
            Some(Polled::Served)
        }
        Received::Closed(a) => Some(Polled::Closed(a)),
    }
}

/// A call slot's channel. Shared memory is kept a concrete type so that the call loop,
/// monomorphised for it, inlines its polls: its round trip is ~0.3 µs, where a virtual call per
/// poll and per frame shows (measured in the closing note of issue 4). The others, whose round
/// trips are microseconds, sit behind a trait object.
pub(crate) enum SlotChannel {
    Shm(Box<shm::ShmClient>),
    Other(Box<dyn ClientChannel>),
}

impl SlotChannel {
    pub fn as_dyn(&mut self) -> &mut dyn ClientChannel {
        match self {
            SlotChannel::Shm(c) => &mut **c,
            SlotChannel::Other(c) => &mut **c,
        }
    }
}

/// Opens a channel to the server at `endpoint`, for lowlat's own protocol.
pub(crate) fn open_channel(endpoint: &Endpoint, uri: &str, cfg: &ClientConfig) -> Result<SlotChannel, Error> {
    let other = |c: Box<dyn ClientChannel>| Ok(SlotChannel::Other(c));
    match endpoint {
        Endpoint::Udp { host_port } => {
            other(Box::new(udp::UdpClient::connect(uri, &resolve(uri, host_port)?, cfg.checksum)?))
        }
        Endpoint::Tcp { host_port } => {
            let framing = tcp::lowlat_framing(cfg.max_message);
            other(Box::new(tcp::TcpClient::connect(uri, resolve(uri, host_port)?, framing, cfg)?))
        }
        Endpoint::Shm { path } => Ok(SlotChannel::Shm(Box::new(shm::ShmClient::connect(uri, path, cfg)?))),
        Endpoint::Eth { iface, peer } => other(Box::new(eth::EthClient::connect(uri, iface, *peer, cfg)?)),
        Endpoint::Xdp { iface, peer } => other(Box::new(xdp::XdpClient::connect(uri, iface, *peer, cfg)?)),
        other => Err(unsupported(uri, other)),
    }
}

/// Opens a channel to the ONC RPC server at `target` (found by the caller, perhaps through
/// rpcbind): a connected UDP socket, or a TCP connection with record marking.
pub(crate) fn open_onc_channel(
    target: SocketAddr,
    tcp: bool,
    uri: &str,
    cfg: &ClientConfig,
) -> Result<Box<dyn ClientChannel>, Error> {
    Ok(if tcp {
        let framing = tcp::RecordMarking::new(cfg.max_message + tcp::ONC_HEADER_ROOM, cfg.onc_max_fragment);
        Box::new(tcp::TcpClient::connect(uri, target, framing, cfg)?)
    } else {
        Box::new(udp::UdpClient::connect(uri, &target, false)?)
    })
}

/// Resolves the `HOST:PORT` of `uri`.
pub(crate) fn resolve(uri: &str, host_port: &str) -> Result<SocketAddr, Error> {
    lowlat_transport::udp::resolve(host_port)
        .map_err(|e| Error::InvalidUri { uri: uri.to_string(), reason: e.to_string() })
}

/// What is done with a server transport once it is bound: the serving layer's (it runs the
/// protocol's serving loop on it). Generic over the transport, so that [`open_server`] matches
/// each scheme once, and nothing here knows the protocols' engines.
pub(crate) trait Bind {
    /// What binding gives the caller.
    type Out;
    /// `ts` speak lowlat's own protocol: one transport per serving thread, all at one address
    /// (at least one).
    fn lowlat<T: ServerTransport + Send + 'static>(self, ts: Vec<T>) -> Self::Out;
    /// `ts` speak ONC RPC over `netid`, bound at `local` (for rpcbind).
    fn onc<T: ServerTransport + Send + 'static>(self, ts: Vec<T>, netid: Netid, local: SocketAddr) -> Self::Out;
}

/// Binds the server transport `endpoint` names, once per serving thread (`cfg.threads`, thread
/// `i` woken by `doorbells[i]`), and hands the transports to `bind`: lowlat's protocol on each
/// scheme, ONC RPC on the `onc+` ones. Over udp the threads' sockets form one `SO_REUSEPORT`
/// group (for lowlat's protocol, steered by session); over shm and tcp the threads' servers
/// form a group handing connections to the thread of their session; over eth the threads'
/// sockets form a `PACKET_FANOUT` group, steered by session; xdp serves with one thread.
pub(crate) fn open_server<B: Bind>(
    endpoint: &Endpoint,
    uri: &str,
    cfg: &ServerConfig,
    doorbells: &[RawFd],
    bind: B,
) -> Result<B::Out, Error> {
    let threads = cfg.serving_threads();
    let onc_addr = |host: &str, port: Option<u16>| resolve(uri, &format!("{host}:{}", port.unwrap_or(0)));
    if threads > 1 && matches!(endpoint, Endpoint::Xdp { .. }) {
        return Err(Error::Unsupported {
            uri: uri.to_string(),
            scheme: endpoint.scheme().to_string(),
            reason: format!("{threads} serving threads were asked for; this version serves xdp:// with one (an AF_XDP socket serves one queue of the interface, and lowlat's namespaces' veth pairs have one)"),
        });
    }
    Ok(match endpoint {
        Endpoint::Udp { host_port } => bind.lowlat(udp::UdpServer::bind_group(
            uri,
            endpoint.scheme(),
            resolve(uri, host_port)?,
            threads,
            cfg.checksum,
            &cfg.allow,
        )?),
        Endpoint::Tcp { host_port } => {
            let framing = tcp::lowlat_framing(cfg.max_message);
            let servers =
                tcp::TcpServer::bind_group(uri, endpoint.scheme(), resolve(uri, host_port)?, framing, doorbells, cfg)?;
            bind.lowlat(servers.into_iter().map(tcp::TcpServer::established_by_sessions).collect())
        }
        Endpoint::OncUdp { host, port } => {
            let ts =
                udp::UdpServer::bind_group(uri, endpoint.scheme(), onc_addr(host, *port)?, threads, false, &cfg.allow)?;
            let local = ts[0].local_addr();
            bind.onc(ts, Netid::Udp, local)
        }
        Endpoint::OncTcp { host, port } => {
            // Records as large as a message; one fragment each way is all a reply takes.
            let framing = tcp::RecordMarking::new(cfg.max_message, usize::MAX);
            let ts =
                tcp::TcpServer::bind_group(uri, endpoint.scheme(), onc_addr(host, *port)?, framing, doorbells, cfg)?;
            let ts: Vec<_> = ts.into_iter().map(|t| t.established_by(tcp::onc_accepted)).collect();
            let local = ts[0].local_addr();
            bind.onc(ts, Netid::Tcp, local)
        }
        Endpoint::Shm { path } => bind.lowlat(shm::ShmServerTransport::bind_group(uri, path, cfg, doorbells)?),
        Endpoint::Eth { iface, .. } => {
            bind.lowlat(eth::FrameServer::<lowlat_eth::EthSocket>::bind_group(uri, iface, cfg, threads)?)
        }
        Endpoint::Xdp { iface, .. } => {
            bind.lowlat(vec![eth::FrameServer::<lowlat_eth::XdpSocket>::bind(uri, iface, cfg)?])
        }
    })
}

fn unsupported(uri: &str, e: &Endpoint) -> Error {
    Error::Unsupported {
        uri: uri.to_string(),
        scheme: e.scheme().to_string(),
        reason: "this transport is not built into this version of lowlat".to_string(),
    }
}

/// What a parked call waits for.
pub(crate) enum WakeOn {
    /// Nothing: a frame may be ready already (poll again at once).
    Now,
    /// Any of these descriptors turning readable (or hanging up).
    Readable([Option<RawFd>; 2]),
    /// Nothing that can be watched: look again after this long (a transport without a
    /// descriptor of its own per call slot).
    After(Duration),
}
