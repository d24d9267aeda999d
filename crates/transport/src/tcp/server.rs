//! The server's side: one endpoint over many connections, driven by one thread through epoll,
//! never blocked by a peer that stops reading, and bounded against strangers ([`TcpLimits`]).

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::framing::{queue_rest, write_frame, Framing, LengthPrefix, PREFIX};
use super::group::{Group, INBOX_TOKEN};
use crate::allow::{allowed, Cidr};

/// Identifies one connection of a [`TcpEndpoint`] or of its group (an id comes back only after
/// 16M more connections to the same member).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    index: u32,
    /// The endpoint's count of connections installed (24 bits) under the number of the group's
    /// member serving it ([`TcpEndpoint::bind_group`]): ids are unique across the group, and 8
    /// bytes, as the call path copies and compares them.
    generation: u32,
}

#[derive(Debug)]
pub(super) struct Conn<F> {
    pub(super) sock: TcpStream,
    pub(super) generation: u32,
    reader: F,
    /// Output the socket did not take yet.
    pub(super) queued: Vec<u8>,
    pub(super) peer: SocketAddr,
    /// When the connection is closed unless its owner has established it by then.
    pub(super) establish_by: Option<Instant>,
    /// What its reader held beyond a read's worth when last counted ([`Framing::held`]).
    pub(super) grown: usize,
}

/// What an endpoint lets strangers hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpLimits {
    /// Connections at once.
    pub max_connections: usize,
    /// Connections at once from one IP address.
    pub max_per_source: usize,
    /// A connection not established (see [`TcpEndpoint::establish`]) this long after it was
    /// accepted is closed; `None`: connections may linger.
    pub establish_within: Option<Duration>,
    /// Only connections from these blocks are served (every one, when empty).
    pub allow: Vec<Cidr>,
    /// Bytes of read buffers, beyond a read's worth each, that one endpoint's connections keep
    /// between frames (grown for large frames, and kept so that the next large frame is read
    /// without allocating again). Past this a connection gives back what it grew after each
    /// frame: connections that once carried large frames cannot make the endpoint hold
    /// `max_connections` times the largest frame.
    pub max_grown: usize,
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits {
            max_connections: 4096,
            max_per_source: 256,
            establish_within: None,
            allow: Vec::new(),
            max_grown: 64 << 20,
        }
    }
}

/// What the limits refused, since the endpoint was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Connections closed at once: the endpoint held `max_connections`.
    pub refused_total: u64,
    /// Connections closed at once: their address held `max_per_source`.
    pub refused_per_source: u64,
    /// Connections closed for not being established in time.
    pub unestablished_closed: u64,
    /// Connections closed at once: their address is outside the allowlist.
    pub not_allowed: u64,
}

/// A limit hit is logged at most this often (each kind on its own).
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs a limit's hits (`log` emits a `tracing` event, target `lowlat::tcp`), at most once per
/// [`LOG_INTERVAL`]; hits meanwhile are only counted ([`TcpStats`]).
#[derive(Debug, Default)]
struct RateLog {
    last: Option<Instant>,
}

impl RateLog {
    fn note(&mut self, now: Instant, log: impl FnOnce()) {
        if self.last.is_none_or(|t| now.saturating_duration_since(t) >= LOG_INTERVAL) {
            self.last = Some(now);
            log();
        }
    }
}

/// Logs a refused or closed connection at WARN under `lowlat::tcp`, with the endpoint, the
/// limit and the interval between two such events.
macro_rules! refused {
    ($message:literal, $($field:tt)*) => {
        tracing::warn!(target: "lowlat::tcp", $($field)*, at_most_every_s = LOG_INTERVAL.as_secs(), $message)
    };
}

/// What the endpoint has for its owner.
#[derive(Debug, PartialEq, Eq)]
pub enum TcpEvent {
    /// A frame arrived (copied into the caller's buffer).
    Frame(ConnId),
    /// The connection closed or broke (and was released).
    Closed(ConnId),
}

const LISTENER_TOKEN: u64 = u64::MAX;
const WAKER_TOKEN: u64 = u64::MAX - 1;

/// A server's TCP side: a listener and its connections, driven by one thread; several, one per
/// thread, share an address as a group ([`bind_group`](Self::bind_group)).
#[derive(Debug)]
pub struct TcpEndpoint<F: Framing = LengthPrefix> {
    /// None in a group's members after the first.
    listener: Option<TcpListener>,
    local: SocketAddr,
    pub(super) epoll: lowlat_sys::Epoll,
    /// Each new connection reads with a copy of this.
    framing: F,
    pub(super) conns: Vec<Option<Conn<F>>>,
    pub(super) generations: u32,
    ready: Vec<libc::epoll_event>,
    ready_len: usize,
    ready_at: usize,
    /// A connection that may hold more frames already read (taken without reading its socket
    /// again: epoll reports the socket if it has more, and a read that finds nothing costs a
    /// system call per call).
    cursor: Option<usize>,
    pub(super) closed: Vec<ConnId>,
    /// Output queued for one peer beyond which it is disconnected.
    pub max_queued: usize,
    limits: TcpLimits,
    /// The earliest `establish_by` of a live connection (perhaps one closed since).
    pub(super) next_deadline: Option<Instant>,
    /// What the connections' readers hold beyond a read's worth each, as last counted.
    pub(super) grown: usize,
    /// What the endpoint refused and cut off since it was bound.
    pub stats: TcpStats,
    logs: [RateLog; 4],
    /// The endpoints of this address (a group of one when bound alone), which this is, and the
    /// member the next connection admitted goes to.
    pub(super) group: Arc<Group<F>>,
    pub(super) member: u16,
    pub(super) next_member: usize,
    /// Frames of connections handed to this member, read by the member that handed them: each
    /// reported before anything else of its connection.
    pub(super) handed_frames: Vec<(usize, Vec<u8>)>,
}

impl TcpEndpoint<LengthPrefix> {
    /// An endpoint for lowlat's frames of at most `max_frame` bytes.
    pub fn bind(addr: SocketAddr, max_frame: usize) -> io::Result<TcpEndpoint> {
        TcpEndpoint::bind_framed(addr, LengthPrefix::new(max_frame))
    }
}

impl<F: Framing> TcpEndpoint<F> {
    /// An endpoint whose connections are cut into frames by `framing`.
    pub fn bind_framed(addr: SocketAddr, framing: F) -> io::Result<TcpEndpoint<F>> {
        let listener =
            TcpListener::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("bind TCP {addr}: {e}")))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        TcpEndpoint::unbound(local, framing, Some(listener), Arc::new(Group::new(1)?))
    }

    /// An endpoint of `local` with no connection yet, accepting on `listener` if any.
    pub(super) fn unbound(
        local: SocketAddr,
        framing: F,
        listener: Option<TcpListener>,
        group: Arc<Group<F>>,
    ) -> io::Result<TcpEndpoint<F>> {
        let max_frame = framing.max_frame();
        let epoll = lowlat_sys::Epoll::new()?;
        let ep = TcpEndpoint {
            listener,
            local,
            epoll,
            framing,
            conns: Vec::new(),
            generations: 0,
            ready: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            ready_len: 0,
            ready_at: 0,
            cursor: None,
            closed: Vec::new(),
            max_queued: 2 * max_frame + (1 << 20),
            limits: TcpLimits::default(),
            next_deadline: None,
            grown: 0,
            stats: TcpStats::default(),
            logs: Default::default(),
            group,
            member: 0,
            next_member: 0,
            handed_frames: Vec::new(),
        };
        if let Some(l) = &ep.listener {
            ep.epoll.add(l.as_raw_fd(), libc::EPOLLIN as u32, LISTENER_TOKEN)?;
        }
        Ok(ep)
    }

    /// The address bound (with the port the system chose, if 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sets what strangers may hold (the defaults: [`TcpLimits::default`]).
    pub fn with_limits(mut self, limits: TcpLimits) -> TcpEndpoint<F> {
        self.limits = limits;
        self
    }

    /// Marks a connection as its owner's (bound, for lowlat): it is no longer closed for
    /// lingering.
    #[inline]
    pub fn establish(&mut self, id: &ConnId) {
        if let Some(c) = self.conns.get_mut(id.index as usize).and_then(Option::as_mut) {
            if c.generation == id.generation && c.establish_by.is_some() {
                c.establish_by = None;
            }
        }
    }

    /// Whether a connection is established (or never had to be).
    #[inline]
    pub fn is_established(&self, id: &ConnId) -> bool {
        self.conn(*id).is_none_or(|c| c.establish_by.is_none())
    }

    /// Closes the connections not established in time; when the next one is due.
    fn close_lingering(&mut self, now: Instant) {
        if self.next_deadline.is_none_or(|t| now < t) {
            return;
        }
        let mut next = None;
        let mut closed = 0;
        for i in 0..self.conns.len() {
            match self.conns[i].as_ref().and_then(|c| c.establish_by) {
                Some(t) if t <= now => {
                    self.close(i);
                    closed += 1;
                }
                Some(t) => next = Some(next.map_or(t, |n: Instant| n.min(t))),
                None => {}
            }
        }
        self.next_deadline = next;
        if closed > 0 {
            self.stats.unestablished_closed += closed;
            let (local, within) = (self.local, self.limits.establish_within.unwrap_or_default());
            self.logs[2].note(now, || {
                refused!("closed connections that did not bind in time", endpoint = %local, within = ?within, closed)
            });
        }
    }

    /// Whether a connection from `peer` may be taken now; counts and logs why not.
    fn admit(&mut self, peer: &SocketAddr, now: Instant) -> bool {
        let local = self.local;
        if !allowed(&self.limits.allow, peer.ip()) {
            self.stats.not_allowed += 1;
            self.logs[3]
                .note(now, || refused!("dropped a connection from outside the allowlist", endpoint = %local, %peer));
            return false;
        }
        let (open, of_source) = self.group.count(peer.ip());
        if open >= self.limits.max_connections {
            self.stats.refused_total += 1;
            let max = self.limits.max_connections;
            self.logs[0].note(
                now,
                || refused!("refused a connection: the endpoint holds its most", endpoint = %local, %peer, max),
            );
            return false;
        }
        if of_source >= self.limits.max_per_source {
            self.stats.refused_per_source += 1;
            let max = self.limits.max_per_source;
            self.logs[1].note(
                now,
                || refused!("refused a connection: its address holds its most", endpoint = %local, %peer, max),
            );
            return false;
        }
        true
    }

    /// Adds a descriptor whose readability should wake `block` (a shutdown or work doorbell).
    pub fn watch(&self, fd: RawFd) -> io::Result<()> {
        self.epoll.add(fd, libc::EPOLLIN as u32, WAKER_TOKEN)
    }

    /// The address of a connection's peer.
    pub fn peer_addr(&self, id: ConnId) -> Option<SocketAddr> {
        self.conn(id).map(|c| c.peer)
    }

    fn conn(&self, id: ConnId) -> Option<&Conn<F>> {
        self.conns.get(id.index as usize)?.as_ref().filter(|c| c.generation == id.generation)
    }

    /// The id of the connection at `index`, of generation `generation`.
    fn id(&self, index: usize, generation: u32) -> ConnId {
        ConnId { index: index as u32, generation }
    }

    fn accept_all(&mut self) {
        let now = Instant::now();
        self.close_lingering(now);
        loop {
            let Some(listener) = &self.listener else { return };
            match listener.accept() {
                Ok((sock, peer)) => {
                    // Dropped at once (closed: the peer sees its connection end).
                    if !self.admit(&peer, now) {
                        continue;
                    }
                    if sock.set_nodelay(true).and_then(|_| sock.set_nonblocking(true)).is_err() {
                        continue;
                    }
                    let establish_by = self.limits.establish_within.map(|d| now + d);
                    // Its generation is given where it is installed (`group::install`).
                    let conn = Conn {
                        sock,
                        generation: 0,
                        reader: self.framing.clone(),
                        queued: Vec::new(),
                        peer,
                        establish_by,
                        grown: 0,
                    };
                    self.group.opened(peer.ip());
                    self.place(conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors or a connection reset before accept: try again later.
                Err(_) => return,
            }
        }
    }

    fn close(&mut self, index: usize) {
        let id = self.conns[index].as_ref().map(|c| self.id(index, c.generation));
        if let Some(c) = id.and_then(|id| self.detach(&id)) {
            self.group.closed(c.peer.ip());
            self.closed.push(self.id(index, c.generation));
        }
    }

    /// Takes connection `id` out of this endpoint (its socket out of the epoll set), counted
    /// still open.
    pub(super) fn detach(&mut self, id: &ConnId) -> Option<Conn<F>> {
        self.conn(*id)?;
        let index = id.index as usize;
        let c = self.conns[index].take()?;
        self.grown -= c.grown;
        self.epoll.delete(c.sock.as_raw_fd());
        if self.cursor == Some(index) {
            self.cursor = None;
        }
        self.handed_frames.retain(|(i, _)| *i != index);
        Some(c)
    }

    fn fetch_ready(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.ready_len = self.epoll.wait(&mut self.ready, timeout)?.len();
        self.ready_at = 0;
        Ok(())
    }

    /// The next frame of connection `index`: read from its socket if `readable` (epoll said
    /// so), else only among the bytes already read.
    fn read_from(&mut self, index: usize, out: &mut Vec<u8>, readable: bool) -> Option<TcpEvent> {
        let c = self.conns.get_mut(index)?.as_mut()?;
        let id = ConnId { index: index as u32, generation: c.generation };
        let got = if readable { c.reader.next(&mut c.sock, out) } else { c.reader.buffered(out) };
        match got {
            Ok(Some(())) => {
                // Over the limit, a connection holding more than a read's worth gives it back at
                // its next frame that leaves nothing partial (`trim` keeps a frame in progress).
                let over = self.grown > self.limits.max_grown && c.grown > 0;
                if over || readable && c.reader.held() != c.grown {
                    // Grown for a large frame: kept for the next one while the endpoint's
                    // connections together are within their limit, else given back.
                    let mut held = c.reader.held();
                    if self.grown - c.grown + held > self.limits.max_grown {
                        c.reader.trim();
                        held = c.reader.held();
                    }
                    self.grown = self.grown - c.grown + held;
                    c.grown = held;
                }
                self.cursor = Some(index);
                Some(TcpEvent::Frame(id))
            }
            Ok(None) => {
                if self.cursor == Some(index) {
                    self.cursor = None;
                }
                None
            }
            Err(_) => {
                self.close(index);
                None
            }
        }
    }

    /// The next event without blocking: a frame (copied into `out`) or a closed connection.
    pub fn try_next(&mut self, out: &mut Vec<u8>) -> io::Result<Option<TcpEvent>> {
        loop {
            if let Some(id) = self.closed.pop() {
                return Ok(Some(TcpEvent::Closed(id)));
            }
            if let Some((index, frame)) = self.handed_frames.pop() {
                let Some(generation) = self.conns[index].as_ref().map(|c| c.generation) else { continue };
                out.clear();
                out.extend_from_slice(&frame);
                // The frames buffered behind it are read next.
                self.cursor = Some(index);
                return Ok(Some(TcpEvent::Frame(self.id(index, generation))));
            }
            if let Some(i) = self.cursor {
                if let Some(ev) = self.read_from(i, out, false) {
                    return Ok(Some(ev));
                }
                continue;
            }
            if self.ready_at == self.ready_len {
                self.fetch_ready(Some(Duration::ZERO))?;
                if self.ready_len == 0 {
                    return Ok(None);
                }
            }
            let ev = self.ready[self.ready_at];
            self.ready_at += 1;
            match ev.u64 {
                LISTENER_TOKEN => self.accept_all(),
                INBOX_TOKEN => self.take_inbox(),
                // The owner's doorbell: hand control back so it can drain it. (It stays readable
                // until drained, so looping here would spin forever.)
                WAKER_TOKEN => return Ok(None),
                token => {
                    let index = token as usize;
                    if ev.events & libc::EPOLLOUT as u32 != 0 {
                        self.flush(index);
                    }
                    if ev.events & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                        if let Some(e) = self.read_from(index, out, true) {
                            return Ok(Some(e));
                        }
                    }
                }
            }
        }
    }

    /// Blocks until something may be ready or the timeout passes (or a connection's time to
    /// be established runs out: it is closed, and reported by `try_next`).
    pub fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.ready_at < self.ready_len
            || self.cursor.is_some()
            || !self.closed.is_empty()
            || !self.handed_frames.is_empty()
        {
            return Ok(());
        }
        let mut timeout = timeout;
        if self.next_deadline.is_some() {
            let now = Instant::now();
            self.close_lingering(now);
            if !self.closed.is_empty() {
                return Ok(());
            }
            if let Some(t) = self.next_deadline {
                let left = t.saturating_duration_since(now);
                timeout = Some(timeout.map_or(left, |d| d.min(left)));
            }
        }
        self.fetch_ready(timeout)
    }

    /// Sends one frame (as one fragment) to a connection; queues what the socket cannot take now. A vanished
    /// connection is not an error (its calls simply have nobody to answer).
    pub fn send(&mut self, to: &ConnId, head: &[u8], body: &[u8]) {
        let index = to.index as usize;
        let max_queued = self.max_queued;
        let Some(c) = self.conns.get_mut(index).and_then(Option::as_mut).filter(|c| c.generation == to.generation)
        else {
            return;
        };
        let prefix = self.framing.header(head.len() + body.len(), true);
        let total = PREFIX + head.len() + body.len();
        let mut failed = false;
        if c.queued.is_empty() {
            match write_frame(&mut c.sock, &prefix, head, body, 0) {
                Ok(n) if n == total => return,
                Ok(n) => queue_rest(&mut c.queued, &prefix, head, body, n),
                Err(_) => failed = true,
            }
        } else {
            queue_rest(&mut c.queued, &prefix, head, body, 0);
        }
        let fd = c.sock.as_raw_fd();
        if failed || c.queued.len() > max_queued {
            self.close(index);
            return;
        }
        let _ = self.epoll.modify(fd, (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLOUT) as u32, index as u64);
    }

    fn flush(&mut self, index: usize) {
        let Some(c) = self.conns.get_mut(index).and_then(Option::as_mut) else { return };
        while !c.queued.is_empty() {
            match c.sock.write(&c.queued) {
                Ok(n) => {
                    c.queued.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.close(index);
                    return;
                }
            }
        }
        let fd = c.sock.as_raw_fd();
        let _ = self.epoll.modify(fd, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, index as u64);
    }
}

impl<F: Framing> AsRawFd for TcpEndpoint<F> {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}
