//! TCP: a connection per client slot. An endpoint of several threads is a group of endpoints of
//! one address, a thread each: connections are spread over them as they are admitted, and a
//! connection whose frame names a session another thread holds is handed to that thread with
//! the frame (a client's other slots thus join the thread where its session was bound; ONC
//! RPC's connections, which name no session, stay where they were admitted). TCP delivers in
//! order, so neither side retransmits and the server keeps no results.
//!
//! The protocol chooses how the stream is cut into frames: lowlat's own length prefix
//! ([`lowlat_framing`]) or ONC RPC's record marking ([`RecordMarking`], RFC 5531 §11, over
//! `lowlat-onc`'s record reader).

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use lowlat_onc::record::{fragment_header, RecordReader};
use lowlat_proto::wire::HeaderView;
use lowlat_proto::{ErrorCode, Kind, SEALED_HEAD_LEN};
use lowlat_sys::poll_readable;
pub(crate) use lowlat_transport::tcp::LengthPrefix;
use lowlat_transport::tcp::{ConnId, Framing, TcpChannel, TcpEndpoint, TcpEvent, TcpLimits, PREFIX, READ_AHEAD};

use super::{each_peer, serve_received, ClientChannel, FrameHandler, Received, Served, ServerTransport, WakeOn};
use crate::stats::EndpointStats;
use crate::{ClientConfig, Error, ServerConfig};

/// Room for an ONC RPC reply's header (a verifier may take 400 bytes) beside a message of results.
pub(crate) const ONC_HEADER_ROOM: usize = 512;

/// lowlat's framing for messages of at most `max_message` bytes (a frame adds the header and,
/// on a keyed session, the tag, and on a sealed one its sequence number).
pub(crate) fn lowlat_framing(max_message: usize) -> LengthPrefix {
    LengthPrefix::new(max_message + SEALED_HEAD_LEN)
}

/// The sessions granted on an endpoint, for establishing the connections a client's other slots
/// open (and call on without binding): the latest token granted for each session index. A
/// connection whose first frames name one of them is its owner's, even before any answer (a
/// long-running procedure's may take longer than the time to bind).
#[derive(Default)]
pub(crate) struct Granted(std::collections::HashMap<u16, u64>);

impl Granted {
    /// Notes the grant in `head`, if it is one.
    fn note(&mut self, head: &[u8]) {
        if let Ok(h) = HeaderView::new_checked(head) {
            if h.kind() == Kind::BindOk {
                self.0.insert(h.session(), h.token());
            }
        }
    }

    /// Whether `frame` names a session granted here.
    fn names_one(&self, frame: &[u8]) -> bool {
        HeaderView::new_checked(frame).is_ok_and(|h| self.0.get(&h.session()) == Some(&h.token()))
    }
}

/// Whether the frame whose header is `head` shows its connection's peer holds a session (a
/// grant, or any answer in a session the server knows: a client's other slots call on
/// connections they never bound on): the connection is then established. A stranger gets only
/// cookies, refusals and "unknown session".
pub(crate) fn lowlat_grant(head: &[u8]) -> bool {
    let Ok(h) = HeaderView::new_checked(head) else {
        return false;
    };
    match h.kind() {
        Kind::BindRetry | Kind::BindRefused => false,
        Kind::Error => ErrorCode::from_u32(h.proc_or_code()) != ErrorCode::UnknownSession,
        _ => true,
    }
}

/// Whether the ONC RPC reply whose header is `head` was accepted (MSG_ACCEPTED): its
/// connection is then established (a denied caller's is not).
pub(crate) fn onc_accepted(head: &[u8]) -> bool {
    head.get(8..12) == Some(&[0, 0, 0, 0])
}

/// ONC RPC's record marking: records of at most `max_record` bytes read, sent in fragments of at
/// most `max_fragment`.
#[derive(Clone, Debug)]
pub(crate) struct RecordMarking {
    records: RecordReader,
    max_fragment: usize,
}

impl RecordMarking {
    pub fn new(max_record: usize, max_fragment: usize) -> RecordMarking {
        RecordMarking { records: RecordReader::new(max_record), max_fragment }
    }
}

impl Framing for RecordMarking {
    fn next(&mut self, sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        loop {
            if self.buffered(out)?.is_some() {
                return Ok(Some(()));
            }
            match sock.read(self.records.buffer(READ_AHEAD)) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the connection")),
                Ok(n) => self.records.filled(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn buffered(&mut self, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        match self.records.next_record() {
            Ok(Some(r)) => {
                out.clear();
                out.extend_from_slice(r);
                Ok(Some(()))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
    }

    fn held(&self) -> usize {
        self.records.held().saturating_sub(2 * READ_AHEAD)
    }

    fn trim(&mut self) {
        self.records.trim(2 * READ_AHEAD);
    }

    fn max_frame(&self) -> usize {
        self.records.max_record()
    }

    fn header(&self, len: usize, last: bool) -> [u8; PREFIX] {
        fragment_header(len, last)
    }

    fn max_fragment(&self) -> usize {
        self.max_fragment
    }
}

pub(crate) struct TcpClient<F: Framing> {
    ch: TcpChannel<F>,
    max_frame: usize,
}

impl<F: Framing> TcpClient<F> {
    pub fn connect(uri: &str, addr: SocketAddr, framing: F, cfg: &ClientConfig) -> Result<TcpClient<F>, Error> {
        let max_frame = framing.max_frame();
        // Refused, or reset as it was made (the server died meanwhile): nobody serves there.
        let ch = TcpChannel::connect_framed(addr, framing, cfg.bind_timeout).map_err(|e| match e.kind() {
            io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
                Error::ServerNotRunning { uri: uri.to_string(), detail: e.to_string() }
            }
            _ => Error::io(format!("{uri}: connect"), e),
        })?;
        Ok(TcpClient { ch, max_frame })
    }
}

impl<F: Framing> ClientChannel for TcpClient<F> {
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.ch.send(head, body)
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        let got = self.ch.try_recv(buf)?.map(|()| buf.len());
        crate::marks::collect(got.is_some());
        Ok(got)
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
        self.max_frame
    }

    fn reliable(&self) -> bool {
        true
    }
}

pub(crate) struct TcpServer<F: Framing> {
    ep: TcpEndpoint<F>,
    max_frame: usize,
    /// The scheme clients use: `tcp` or `onc+tcp`.
    scheme: &'static str,
    /// Whether a frame sent (its header) establishes the connection it goes on (a lowlat
    /// grant; any ONC RPC reply).
    establishes: fn(&[u8]) -> bool,
    /// lowlat only: the sessions granted, so that a connection calling in one is established.
    granted: Option<Granted>,
}

impl<F: Framing> TcpServer<F> {
    /// Serves frames of at most `framing`'s maximum, within the limits of `cfg` (for the
    /// endpoint as a whole), with one endpoint of a group per serving thread (see
    /// `lowlat_transport::tcp::TcpEndpoint::bind_group`), thread `i` woken by `doorbells[i]`.
    /// Any frame sent establishes a connection, unless [`established_by`](Self::established_by)
    /// says otherwise.
    pub fn bind_group(
        uri: &str,
        scheme: &'static str,
        addr: SocketAddr,
        framing: F,
        doorbells: &[RawFd],
        cfg: &ServerConfig,
    ) -> Result<Vec<TcpServer<F>>, Error> {
        // Frames carry a whole message (a bind request is far smaller than any maximum).
        let max_frame = framing.max_frame();
        let limits = TcpLimits {
            max_connections: cfg.max_connections,
            max_per_source: cfg.max_connections_per_source,
            establish_within: Some(cfg.bind_within),
            allow: cfg.allow.clone(),
            ..TcpLimits::default()
        };
        let group = TcpEndpoint::bind_group(addr, framing, doorbells.len())
            .map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        group
            .into_iter()
            .zip(doorbells)
            .map(|(ep, &doorbell)| {
                let ep = ep.with_limits(limits.clone());
                ep.watch(doorbell).map_err(|e| Error::io(format!("{uri}: watch doorbell"), e))?;
                Ok(TcpServer { ep, max_frame, scheme, establishes: |_| true, granted: None })
            })
            .collect()
    }

    /// Establishes a connection only when a frame whose header passes `grants` goes on it.
    pub fn established_by(mut self, grants: fn(&[u8]) -> bool) -> TcpServer<F> {
        self.establishes = grants;
        self
    }

    /// lowlat's rule: established by an answer within a session (see [`lowlat_grant`]), or by a
    /// frame naming a session granted on this endpoint.
    pub fn established_by_sessions(self) -> TcpServer<F> {
        TcpServer { granted: Some(Granted::default()), ..self.established_by(lowlat_grant) }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.ep.local_addr()
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Received<ConnId>>> {
        Ok(self.ep.try_next(buf)?.map(|ev| match ev {
            TcpEvent::Frame(from) => Received::Frame { len: buf.len(), from },
            TcpEvent::Closed(id) => Received::Closed(id),
        }))
    }
}

impl<F: Framing> ServerTransport for TcpServer<F> {
    type Addr = ConnId;

    fn serve_next(&mut self, buf: &mut Vec<u8>, h: &mut impl FrameHandler<ConnId>) -> Served<ConnId> {
        let got = self.try_recv(buf)?;
        if let (Some(Received::Frame { from, .. }), Some(granted)) = (&got, &self.granted) {
            if !self.ep.is_established(from) && granted.names_one(buf) {
                self.ep.establish(from);
            }
        }
        let from = match &got {
            Some(Received::Frame { from, .. }) => Some(*from),
            _ => None,
        };
        let served = serve_received(self, got, buf, h);
        if let (Some(from), Some(to)) = (from, h.handed_over()) {
            // Another thread holds the session: the connection goes there with this frame
            // (reported closed here by a later look).
            self.ep.hand_over(&from, buf, usize::from(to));
        }
        Ok(served)
    }

    fn send(&mut self, to: &ConnId, head: &[u8], body: &[u8]) {
        if (self.establishes)(head) {
            self.ep.establish(to);
            if let Some(g) = self.granted.as_mut() {
                g.note(head);
            }
        }
        self.ep.send(to, head, body);
        crate::marks::replied();
    }

    fn block(&mut self, _doorbell: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        // The doorbell is in the epoll set (`watch` at bind).
        self.ep.block(timeout)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn local_uri(&self) -> String {
        format!("{}://{}", self.scheme, self.ep.local_addr())
    }

    fn reliable(&self) -> bool {
        true
    }

    fn hands_over(&self) -> bool {
        true
    }

    /// Each connection its own source: the endpoint bounds connections per address.
    fn source(peer: &ConnId) -> u128 {
        each_peer(peer)
    }

    fn count(&self, into: &mut EndpointStats) {
        let s = self.ep.stats;
        into.connections_refused += s.refused_total + s.refused_per_source;
        into.connections_unbound_closed += s.unestablished_closed;
        into.not_allowed += s.not_allowed;
    }
}
