//! lowlat over shared memory (`shm://PATH`): one connection (a pair of rings in a sealed memfd) per
//! client slot. An endpoint of several threads is a group of servers of one path, a thread each:
//! connections are spread over them as they are admitted, and a connection whose frame names a
//! session another thread holds is handed to that thread, frame unread (a client's other slots
//! thus join the thread where its session was bound). The rings deliver every frame
//! in order, so, as over TCP, neither side retransmits.
//!
//! The rings stream messages larger than themselves, so a frame always carries a whole message.
//! Waiting is the runtime's spin-then-block; `block` sleeps on the ring's tripwire (client) or
//! in epoll on the connections' doorbells and the runtime's own doorbell (server).

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lowlat_proto::HEADER_LEN;
use lowlat_shm::{Activity, ChannelConfig, ConnectionId, ShmChannel, ShmError, ShmServer};

use super::{each_peer, ClientChannel, FrameHandler, Polled, Served, ServerTransport, WakeOn};
use crate::stats::EndpointStats;
use crate::{ClientConfig, Error, ServerConfig};

fn to_io(e: ShmError) -> io::Error {
    let kind = match &e {
        ShmError::PeerGone | ShmError::Broken(_) => io::ErrorKind::ConnectionReset,
        ShmError::Timeout { .. } | ShmError::Stalled { .. } => io::ErrorKind::TimedOut,
        ShmError::Ring(lowlat_shm::RingError::TooLarge { .. }) => io::ErrorKind::InvalidInput,
        ShmError::Ring(_) | ShmError::Handshake { .. } => io::ErrorKind::InvalidData,
        ShmError::Io { source, .. } => source.kind(),
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

pub(crate) struct ShmClient {
    ch: ShmChannel,
    max_frame: usize,
    /// Bounds a send that waits for ring space (only large messages ever wait).
    send_timeout: Duration,
}

impl ShmClient {
    pub fn connect(uri: &str, path: &Path, cfg: &ClientConfig) -> Result<ShmClient, Error> {
        let max_frame = cfg.max_message + HEADER_LEN;
        let ccfg = ChannelConfig { spin: cfg.spin, connect_timeout: cfg.bind_timeout, max_message: max_frame };
        let ch = ShmChannel::connect(path, ccfg).map_err(|e| match e {
            // No server at the path, or one that died (or stopped) before handing over the
            // connection: nothing was sent, so the caller may safely try again.
            ShmError::Io { source, .. }
                if matches!(
                    source.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::BrokenPipe
                ) =>
            {
                Error::ServerNotRunning { uri: uri.to_string(), detail: source.to_string() }
            }
            e @ ShmError::PeerGone => Error::ServerNotRunning { uri: uri.to_string(), detail: e.to_string() },
            e @ (ShmError::Refused { .. } | ShmError::Busy) => {
                Error::BindRefused { uri: uri.to_string(), reason: e.to_string() }
            }
            e => Error::io(format!("{uri}: connect"), to_io(e)),
        })?;
        Ok(ShmClient { ch, max_frame, send_timeout: cfg.deadline })
    }
}

impl ShmClient {
    /// Lends the call ring's free space to build a frame where the server will read it, sent
    /// as one record if `build` returns its length (see [`ShmChannel::send_in_place`]).
    #[inline]
    pub fn send_in_place(&mut self, build: impl FnOnce(&mut [u8]) -> Option<usize>) -> io::Result<Option<usize>> {
        self.ch.send_in_place(build).map_err(to_io)
    }

    /// The frame sent last, read back from the call ring, if nothing was sent or lent since.
    pub fn last_sent(&self) -> Option<&[u8]> {
        self.ch.last_sent()
    }
}

impl ClientChannel for ShmClient {
    #[inline]
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.ch.send_two_within(head, body, self.send_timeout).map_err(to_io)
    }

    #[inline]
    fn try_recv(&mut self, _buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        // The reply stays in the result ring, read where it lies (`received`).
        let got = self.ch.try_recv().map_err(to_io)?.map(|m| m.len());
        crate::marks::collect(got.is_some());
        Ok(got)
    }

    #[inline]
    fn received<'a>(&'a self, _buf: &'a [u8], _len: usize) -> &'a [u8] {
        self.ch.received()
    }

    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.ch.block(timeout).map_err(to_io)
    }

    fn park(&mut self) -> io::Result<WakeOn> {
        // The server rings the result eventfd for a parked client; a dead one makes the
        // liveness socket readable.
        if self.ch.park().map_err(to_io)? {
            self.ch.unpark(false).map_err(to_io)?;
            return Ok(WakeOn::Now);
        }
        Ok(WakeOn::Readable([Some(self.ch.result_bell()), Some(self.ch.liveness_fd())]))
    }

    fn ready(&mut self) -> bool {
        self.ch.has_reply()
    }

    fn unpark(&mut self, timed_out: bool) -> io::Result<()> {
        self.ch.unpark(timed_out).map_err(to_io)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn reliable(&self) -> bool {
        true
    }

    fn private(&self) -> bool {
        true
    }
}

pub(crate) struct ShmServerTransport {
    srv: ShmServer,
    path: PathBuf,
    max_frame: usize,
    /// Frames waiting for a lent result ring's space to come back (see `serve_next`), kept
    /// between calls so that queueing allocates nothing once warm.
    queued: Vec<u8>,
    queued_to: Vec<(ConnectionId, std::ops::Range<usize>)>,
}

impl ShmServerTransport {
    /// Listens at `path` with one server per serving thread (a group: see
    /// `lowlat_shm::ShmServer::bind_group`), thread `i` woken by `doorbells[i]`.
    pub fn bind_group(
        uri: &str,
        path: &Path,
        cfg: &ServerConfig,
        doorbells: &[RawFd],
    ) -> Result<Vec<ShmServerTransport>, Error> {
        let max_frame = cfg.max_message + HEADER_LEN;
        let scfg = lowlat_shm::ShmServerConfig { spin: cfg.spin, max_message: max_frame, ..Default::default() };
        let group = ShmServer::bind_group(path, scfg, doorbells.len())
            .map_err(|e| Error::io(format!("{uri}: serve"), to_io(e)))?;
        group
            .into_iter()
            .zip(doorbells)
            .map(|(mut srv, &doorbell)| {
                srv.watch(doorbell).map_err(|e| Error::io(format!("{uri}: watch doorbell"), to_io(e)))?;
                Ok(ShmServerTransport {
                    srv,
                    path: path.to_path_buf(),
                    max_frame,
                    queued: Vec::new(),
                    queued_to: Vec::new(),
                })
            })
            .collect()
    }
}

impl ServerTransport for ShmServerTransport {
    type Addr = ConnectionId;

    #[inline]
    fn serve_next(
        &mut self,
        _buf: &mut Vec<u8>,
        handler: &mut impl FrameHandler<ConnectionId>,
    ) -> Served<ConnectionId> {
        // The procedure writes its result straight into the caller's result ring, in space the
        // ring lends while the frame is handled. Anything the engine sends meanwhile (answers
        // to handshakes and stray frames, all small) is queued and sent once the space is back,
        // as is a result that did not fit it (`flush`, from the engine's buffer). The first
        // frame for the caller goes through its `Reply`; any other after `serve_next`.
        let (queued, queued_to) = (&mut self.queued, &mut self.queued_to);
        queued.clear();
        queued_to.clear();
        let got = self.srv.serve_next(|id, frame, mut reply| {
            crate::marks::collect(true);

            let mut queue = |to: &ConnectionId, head: &[u8], body: &[u8]| {
                let start = queued.len();
                queued.extend_from_slice(head);
                queued.extend_from_slice(body);
                queued_to.push((*to, start..queued.len()));
            };
            // A connection that cannot take its reply is closed and reported by a later
            // `serve_next`.
            let _ = reply.build_in_place(|lent| Some(handler.handle(id, frame, lent, &mut queue)).filter(|&n| n > 0));
            if let Some(to) = handler.handed_over() {
                // Another thread holds the session: the connection goes there, the frame unread.
                reply.hand_over(usize::from(to));
                return;
            }
            crate::marks::replied();
            handler.flush(&mut queue);
            let mine = queued_to.iter().position(|(to, _)| *to == id);
            if let Some(i) = mine {
                let (_, range) = queued_to.remove(i);
                let _ = reply.send(&[&queued[range]]);
            }
        });
        for (to, range) in self.queued_to.drain(..) {
            let _ = self.srv.send_reply(to, &[&self.queued[range]]);
        }
        Ok(got.map(|a| match a {
            Activity::Request(..) => Polled::Served,
            Activity::Closed(id) => Polled::Closed(id),
        }))
    }

    fn send(&mut self, to: &ConnectionId, head: &[u8], body: &[u8]) {
        // A connection that cannot take its reply is closed and reported by `try_recv`.
        let _ = self.srv.send_reply(*to, &[head, body]);
    }

    fn block(&mut self, _doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        // The doorbell is in the server's epoll set (`watch` at bind).
        self.srv.block(timeout).map_err(to_io)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn local_uri(&self) -> String {
        format!("shm://{}", self.path.display())
    }

    fn reliable(&self) -> bool {
        true
    }

    fn private(&self) -> bool {
        true
    }

    fn hands_over(&self) -> bool {
        true
    }

    fn source(peer: &ConnectionId) -> u128 {
        each_peer(peer)
    }

    fn count(&self, into: &mut EndpointStats) {
        into.corrupt_connections += self.srv.corrupt_connections();
    }
}
