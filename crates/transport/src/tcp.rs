//! TCP: a byte stream cut into frames, TCP_NODELAY always.
//!
//! How the stream is cut is the protocol's choice, a [`Framing`]: lowlat's own frames are prefixed
//! with their length ([`LengthPrefix`]: u32, little-endian); ONC RPC's are records of fragments
//! (RFC 5531 record marking, which the runtime's driver plugs in from `lowlat-onc`). This crate
//! knows only how to move them.
//!
//! A client channel is one connection. A server is one thread over many connections: it spins on
//! `epoll_wait(0)` and blocks in `epoll_wait(timeout)`, and never blocks on a write: output that
//! does not fit in the socket is queued per connection and flushed when writable, and a peer that
//! stops reading is disconnected once its queue passes a limit, so it cannot stall the others.
//!
//! Strangers cannot hold a server's connections: an endpoint takes at most
//! [`TcpLimits::max_connections`] at once and [`TcpLimits::max_per_source`] from one IP address,
//! closes a connection its owner has not [`establish`](TcpEndpoint::establish)ed (bound, for
//! lowlat) within [`TcpLimits::establish_within`], and drops connections from outside its
//! allowlist at once. Each limit hit is counted ([`TcpStats`]) and logged at most once per
//! [`LOG_INTERVAL`].

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::allow::{allowed, Cidr};

/// Bytes of the length prefix.
pub const PREFIX: usize = 4;

/// Why a stream of frames could not be read.
fn bad_frame(len: usize, max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("peer sent a {len}-byte frame, larger than the {max}-byte maximum"),
    )
}

/// How a byte stream is cut into frames, for one connection: reading (the state of a frame in
/// progress) and the header written before each fragment sent.
pub trait Framing: Clone + Send + 'static {
    /// Reads what `sock` has and returns the next frame, copied into `out`. `Ok(None)`: no
    /// complete frame yet. `UnexpectedEof`: the peer closed. `InvalidData`: the peer broke the
    /// framing (a frame larger than the maximum), and the stream cannot be read further.
    fn next(&mut self, sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<Option<()>>;
    /// Largest frame read.
    fn max_frame(&self) -> usize;
    /// The header before a fragment of `len` bytes; `last`: the fragment ends its frame.
    fn header(&self, len: usize, last: bool) -> [u8; PREFIX];
    /// Largest fragment a channel sends (a larger frame goes in several): unbounded unless the
    /// framing has fragments.
    fn max_fragment(&self) -> usize {
        usize::MAX
    }
}

/// lowlat's framing: each frame after its length (u32, little-endian), frames of at most `max`
/// bytes.
#[derive(Clone, Debug)]
pub struct LengthPrefix {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
}

impl LengthPrefix {
    /// A reader of frames of at most `max` bytes (a larger one breaks the stream: `InvalidData`).
    pub fn new(max: usize) -> LengthPrefix {
        LengthPrefix { buf: Vec::new(), start: 0, end: 0, max }
    }

    /// The next complete frame's range in `buf`, if one is buffered.
    fn complete(&self, max: usize) -> io::Result<Option<(usize, usize)>> {
        let avail = self.end - self.start;
        if avail < PREFIX {
            return Ok(None);
        }
        let mut p = [0u8; PREFIX];
        p.copy_from_slice(&self.buf[self.start..self.start + PREFIX]);
        let len = u32::from_le_bytes(p) as usize;
        if len > max {
            return Err(bad_frame(len, max));
        }
        if avail < PREFIX + len {
            return Ok(None);
        }
        Ok(Some((self.start + PREFIX, len)))
    }
}

impl Framing for LengthPrefix {
    fn next(&mut self, sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        let max = self.max;
        loop {
            if let Some((at, len)) = self.complete(max)? {
                out.clear();
                out.extend_from_slice(&self.buf[at..at + len]);
                self.start = at + len;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                return Ok(Some(()));
            }
            // Make room: move the partial frame to the front, grow to hold a whole one.
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let want = if self.end >= PREFIX {
                let mut p = [0u8; PREFIX];
                p.copy_from_slice(&self.buf[..PREFIX]);
                PREFIX + u32::from_le_bytes(p) as usize
            } else {
                PREFIX + 64 * 1024
            };
            if self.buf.len() < want.max(PREFIX + 64 * 1024) {
                self.buf.resize(want.max(PREFIX + 64 * 1024), 0);
            }
            match sock.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the connection")),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn max_frame(&self) -> usize {
        self.max
    }

    fn header(&self, len: usize, _last: bool) -> [u8; PREFIX] {
        // Never split (`max_fragment` is unbounded): every fragment is a whole frame.
        (len as u32).to_le_bytes()
    }
}

/// Writes `prefix + head + body` with as few system calls as possible; returns bytes written.
fn write_frame(
    sock: &mut TcpStream,
    prefix: &[u8; PREFIX],
    head: &[u8],
    body: &[u8],
    skip: usize,
) -> io::Result<usize> {
    let parts = [&prefix[..], head, body];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut done = skip;
    while done < total {
        let mut iov: [IoSlice; 3] = [IoSlice::new(&[]), IoSlice::new(&[]), IoSlice::new(&[])];
        let mut n = 0;
        let mut off = done;
        for p in parts {
            if off >= p.len() {
                off -= p.len();
                continue;
            }
            iov[n] = IoSlice::new(&p[off..]);
            off = 0;
            n += 1;
        }
        match sock.write_vectored(&iov[..n]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed while writing")),
            Ok(w) => done += w,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(done),
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A client's TCP channel: one connection.
#[derive(Debug)]
pub struct TcpChannel<F: Framing = LengthPrefix> {
    sock: TcpStream,
    framing: F,
}

impl TcpChannel<LengthPrefix> {
    /// A connection carrying lowlat's frames of at most `max_frame` bytes.
    pub fn connect(peer: SocketAddr, max_frame: usize, timeout: Duration) -> io::Result<TcpChannel> {
        TcpChannel::connect_framed(peer, LengthPrefix::new(max_frame), timeout)
    }
}

impl<F: Framing> TcpChannel<F> {
    /// A connection cut into frames by `framing`.
    pub fn connect_framed(peer: SocketAddr, framing: F, timeout: Duration) -> io::Result<TcpChannel<F>> {
        let sock = TcpStream::connect_timeout(&peer, timeout)
            .map_err(|e| io::Error::new(e.kind(), format!("connect TCP {peer}: {e}")))?;
        // With nobody listening on a port of the ephemeral range, the kernel may pick that very
        // port for this socket and connect it to itself (TCP's simultaneous open): no server
        // is there, and the port would stay taken from one that comes back.
        if sock.local_addr()? == peer {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("connect TCP {peer}: nobody listens there (the socket connected to itself)"),
            ));
        }
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        Ok(TcpChannel { sock, framing })
    }

    /// Sends one frame, `head` then `body`, blocking (in poll) while the socket is full; fails if
    /// the peer is gone. A frame larger than the framing's fragments goes in several.
    pub fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let total = head.len() + body.len();
        let max = self.framing.max_fragment().max(1);
        if total <= max {
            return self.send_fragment(&self.framing.header(total, true), head, body);
        }
        let mut at = 0;
        while at < total {
            let end = (at + max).min(total);
            // The fragment's bytes of `head` and of `body`.
            let h = &head[at.min(head.len())..end.min(head.len())];
            let b = &body[at.saturating_sub(head.len())..end.saturating_sub(head.len())];
            self.send_fragment(&self.framing.header(end - at, end == total), h, b)?;
            at = end;
        }
        Ok(())
    }

    fn send_fragment(&mut self, prefix: &[u8; PREFIX], head: &[u8], body: &[u8]) -> io::Result<()> {
        let total = PREFIX + head.len() + body.len();
        let mut done = 0;
        loop {
            done = write_frame(&mut self.sock, prefix, head, body, done)?;
            if done == total {
                return Ok(());
            }
            poll_writable(self.sock.as_raw_fd(), Some(Duration::from_millis(100)))?;
        }
    }

    /// Receives one frame into `out` without blocking. `UnexpectedEof` when the server closed.
    pub fn try_recv(&mut self, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        self.framing.next(&mut self.sock, out)
    }
}

impl<F: Framing> AsRawFd for TcpChannel<F> {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

fn poll_writable(fd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
    let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
    lowlat_sys::poll_set(&mut p, timeout).map(|_| ())
}

/// Identifies one connection of a [`TcpEndpoint`] (never reused while the endpoint lives).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
struct Conn<F> {
    sock: TcpStream,
    generation: u32,
    reader: F,
    /// Output the socket did not take yet.
    queued: Vec<u8>,
    peer: SocketAddr,
    /// When the connection is closed unless its owner has established it by then.
    establish_by: Option<Instant>,
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
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits { max_connections: 4096, max_per_source: 256, establish_within: None, allow: Vec::new() }
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

/// Logs a limit's hits, at most once per [`LOG_INTERVAL`].
#[derive(Debug, Default)]
struct RateLog {
    last: Option<Instant>,
}

impl RateLog {
    fn note(&mut self, now: Instant, what: impl FnOnce() -> String) {
        if self.last.is_none_or(|t| now.saturating_duration_since(t) >= LOG_INTERVAL) {
            self.last = Some(now);
            eprintln!("lowlat: {} (said at most once every {} s)", what(), LOG_INTERVAL.as_secs());
        }
    }
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

/// A server's TCP side: a listener and its connections, driven by one thread.
#[derive(Debug)]
pub struct TcpEndpoint<F: Framing = LengthPrefix> {
    listener: TcpListener,
    local: SocketAddr,
    epoll: lowlat_sys::Epoll,
    /// Each new connection reads with a copy of this.
    framing: F,
    conns: Vec<Option<Conn<F>>>,
    generations: u32,
    ready: Vec<libc::epoll_event>,
    ready_len: usize,
    ready_at: usize,
    /// A connection that may hold more buffered frames.
    cursor: Option<usize>,
    closed: Vec<ConnId>,
    /// Output queued for one peer beyond which it is disconnected.
    pub max_queued: usize,
    limits: TcpLimits,
    live: usize,
    /// The earliest `establish_by` of a live connection (perhaps one closed since).
    next_deadline: Option<Instant>,
    /// What the endpoint refused and cut off since it was bound.
    pub stats: TcpStats,
    logs: [RateLog; 4],
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
        let max_frame = framing.max_frame();
        let listener =
            TcpListener::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("bind TCP {addr}: {e}")))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
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
            live: 0,
            next_deadline: None,
            stats: TcpStats::default(),
            logs: Default::default(),
        };
        ep.epoll.add(ep.listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER_TOKEN)?;
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
            self.logs[2].note(now, || format!("tcp {local}: closed connections that did not bind within {within:?}"));
        }
    }

    /// Whether a connection from `peer` may be taken now; counts and logs why not.
    fn admit(&mut self, peer: &SocketAddr, now: Instant) -> bool {
        let local = self.local;
        if !allowed(&self.limits.allow, peer.ip()) {
            self.stats.not_allowed += 1;
            self.logs[3].note(now, || format!("tcp {local}: dropped connections from outside the allowlist ({peer})"));
            return false;
        }
        if self.live >= self.limits.max_connections {
            self.stats.refused_total += 1;
            let max = self.limits.max_connections;
            self.logs[0].note(now, || format!("tcp {local}: refused connections: {max} already open"));
            return false;
        }
        let ip = peer.ip();
        let of_source = self.conns.iter().flatten().filter(|c| c.peer.ip() == ip).count();
        if of_source >= self.limits.max_per_source {
            self.stats.refused_per_source += 1;
            let max = self.limits.max_per_source;
            self.logs[1].note(now, || format!("tcp {local}: refused connections from {ip}: {max} already open"));
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

    fn accept_all(&mut self) {
        let now = Instant::now();
        self.close_lingering(now);
        loop {
            match self.listener.accept() {
                Ok((sock, peer)) => {
                    // Dropped at once (closed: the peer sees its connection end).
                    if !self.admit(&peer, now) {
                        continue;
                    }
                    if sock.set_nodelay(true).and_then(|_| sock.set_nonblocking(true)).is_err() {
                        continue;
                    }
                    let index = match self.conns.iter().position(Option::is_none) {
                        Some(i) => i,
                        None => {
                            self.conns.push(None);
                            self.conns.len() - 1
                        }
                    };
                    self.generations = self.generations.wrapping_add(1);
                    let fd = sock.as_raw_fd();
                    let establish_by = self.limits.establish_within.map(|d| now + d);
                    self.conns[index] = Some(Conn {
                        sock,
                        generation: self.generations,
                        reader: self.framing.clone(),
                        queued: Vec::new(),
                        peer,
                        establish_by,
                    });
                    if self.epoll.add(fd, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, index as u64).is_err() {
                        self.conns[index] = None;
                        continue;
                    }
                    self.live += 1;
                    if let Some(t) = establish_by {
                        self.next_deadline = Some(self.next_deadline.map_or(t, |n| n.min(t)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors or a connection reset before accept: try again later.
                Err(_) => return,
            }
        }
    }

    fn close(&mut self, index: usize) {
        if let Some(c) = self.conns[index].take() {
            self.live -= 1;
            self.epoll.delete(c.sock.as_raw_fd());
            self.closed.push(ConnId { index: index as u32, generation: c.generation });
        }
        if self.cursor == Some(index) {
            self.cursor = None;
        }
    }

    fn fetch_ready(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.ready_len = self.epoll.wait(&mut self.ready, timeout)?.len();
        self.ready_at = 0;
        Ok(())
    }

    fn read_from(&mut self, index: usize, out: &mut Vec<u8>) -> Option<TcpEvent> {
        let c = self.conns.get_mut(index)?.as_mut()?;
        let id = ConnId { index: index as u32, generation: c.generation };
        match c.reader.next(&mut c.sock, out) {
            Ok(Some(())) => {
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
            if let Some(i) = self.cursor {
                if let Some(ev) = self.read_from(i, out) {
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
                // The owner's doorbell: hand control back so it can drain it. (It stays readable
                // until drained, so looping here would spin forever.)
                WAKER_TOKEN => return Ok(None),
                token => {
                    let index = token as usize;
                    if ev.events & libc::EPOLLOUT as u32 != 0 {
                        self.flush(index);
                    }
                    if ev.events & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                        if let Some(e) = self.read_from(index, out) {
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
        if self.ready_at < self.ready_len || self.cursor.is_some() || !self.closed.is_empty() {
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

fn queue_rest(q: &mut Vec<u8>, prefix: &[u8; PREFIX], head: &[u8], body: &[u8], mut skip: usize) {
    for p in [&prefix[..], head, body] {
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        q.extend_from_slice(&p[skip..]);
        skip = 0;
    }
}

impl<F: Framing> AsRawFd for TcpEndpoint<F> {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn next_event(ep: &mut TcpEndpoint, out: &mut Vec<u8>) -> TcpEvent {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = ep.try_next(out).unwrap() {
                return e;
            }
            assert!(Instant::now() < deadline, "no event");
            ep.block(Some(Duration::from_millis(50))).unwrap();
        }
    }

    fn recv(ch: &mut TcpChannel, out: &mut Vec<u8>) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if ch.try_recv(out)?.is_some() {
                return Ok(());
            }
            assert!(Instant::now() < deadline, "no frame");
            lowlat_sys::wait_readable(ch, Some(Duration::from_millis(50)))?;
        }
    }

    #[test]
    fn frames_cross_in_both_directions_including_large_ones() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 4 << 20).unwrap();
        let mut ch = TcpChannel::connect(ep.local_addr(), 4 << 20, Duration::from_secs(5)).unwrap();
        let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        for body in [&b""[..], b"x", &big[..]] {
            let id = std::thread::scope(|s| {
                s.spawn(|| ch.send(b"HEAD", body).unwrap());
                let ev = next_event(&mut ep, &mut out);
                let TcpEvent::Frame(id) = ev else { panic!("{ev:?}") };
                id
            });
            assert_eq!(&out[..4], b"HEAD");
            assert_eq!(&out[4..], body);
            // The reply may not fit in the socket at once: the endpoint queues it.
            ep.send(&id, b"R", body);
            let mut got = Vec::new();
            std::thread::scope(|s| {
                let h = s.spawn(|| recv(&mut ch, &mut got).unwrap());
                // Keep flushing the queue while the client reads.
                while !h.is_finished() {
                    let _ = ep.try_next(&mut out).unwrap();
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            assert_eq!(got.len(), 1 + body.len());
            assert_eq!(&got[1..], body);
        }
        drop(ch);
        assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Closed(_)));
    }

    /// Fragments of at most 3 bytes whose headers say (length, last), to see a frame split.
    #[derive(Clone)]
    struct Threes;

    impl Framing for Threes {
        fn next(&mut self, _: &mut TcpStream, _: &mut Vec<u8>) -> io::Result<Option<()>> {
            Ok(None)
        }
        fn max_frame(&self) -> usize {
            0
        }
        fn header(&self, len: usize, last: bool) -> [u8; PREFIX] {
            (len as u32 | (last as u32) << 31).to_le_bytes()
        }
        fn max_fragment(&self) -> usize {
            3
        }
    }

    #[test]
    fn frames_above_the_fragment_size_go_in_several() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut ch =
            TcpChannel::connect_framed(listener.local_addr().unwrap(), Threes, Duration::from_secs(5)).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Fragments cut across the header and the body, and one exactly the fragment size.
        ch.send(b"ab", b"cdefg").unwrap();
        ch.send(b"xyz", b"").unwrap();
        let mut got = vec![0u8; 4 * 4 + 10];
        peer.read_exact(&mut got).unwrap();
        let h = |len: u32, last: bool| (len | (last as u32) << 31).to_le_bytes();
        let want = [&h(3, false)[..], b"abc", &h(3, false), b"def", &h(1, true), b"g", &h(3, true), b"xyz"].concat();
        assert_eq!(got, want);
    }

    #[test]
    fn a_watched_doorbell_hands_control_back() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 100).unwrap();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        ep.watch(a.as_raw_fd()).unwrap();
        (&b).write_all(b"x").unwrap();
        let mut out = Vec::new();
        // The doorbell stays readable: try_next must return rather than loop on it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = ep.try_next(&mut out).map(|e| e.is_none());
            let _ = tx.send(r.unwrap());
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
    }

    /// Connections beyond the limits, from outside the allowlist, or not established in time
    /// are closed (the peer reads the end of its stream), counted; the others are served.
    #[test]
    fn strangers_cannot_hold_connections() {
        let limits = TcpLimits {
            max_connections: 3,
            max_per_source: 2,
            establish_within: Some(Duration::from_millis(300)),
            allow: vec!["127.0.0.0/30".parse().unwrap()],
        };
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 100).unwrap().with_limits(limits);
        let addr = ep.local_addr();
        let from = |ip: &str| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::new(ip.parse().unwrap(), 0).into()).unwrap();
            s.connect(&addr.into()).unwrap();
            let s: TcpStream = s.into();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s
        };
        let ended = |mut s: &TcpStream| matches!(s.read(&mut [0u8; 1]), Ok(0) | Err(_));
        let mut out = Vec::new();
        let pump = |ep: &mut TcpEndpoint, out: &mut Vec<u8>, ms: u64| {
            let end = Instant::now() + Duration::from_millis(ms);
            let mut events = Vec::new();
            while Instant::now() < end {
                if let Some(e) = ep.try_next(out).unwrap() {
                    events.push(e);
                }
                ep.block(Some(Duration::from_millis(5))).unwrap();
            }
            events
        };
        let a1 = from("127.0.0.1");
        let a2 = from("127.0.0.1");
        let a3 = from("127.0.0.1"); // a third from one address
        let b1 = from("127.0.0.2");
        let c1 = from("127.0.0.3"); // a fourth in all
        let d1 = from("127.0.0.9"); // outside the allowlist
        pump(&mut ep, &mut out, 50);
        for s in [&a3, &c1, &d1] {
            assert!(ended(s), "closed at once");
        }
        assert_eq!((ep.stats.refused_per_source, ep.stats.refused_total, ep.stats.not_allowed), (1, 1, 1));
        // a1 binds (its owner establishes it); the others linger and are closed.
        (&a1).write_all(&2u32.to_le_bytes()).unwrap();
        (&a1).write_all(b"hi").unwrap();
        let events = pump(&mut ep, &mut out, 50);
        let Some(TcpEvent::Frame(id)) = events.first() else { panic!("{events:?}") };
        ep.establish(id);
        let events = pump(&mut ep, &mut out, 500);
        assert_eq!(events.iter().filter(|e| matches!(e, TcpEvent::Closed(_))).count(), 2, "{events:?}");
        assert!(ended(&a2) && ended(&b1));
        assert_eq!(ep.stats.unestablished_closed, 2);
        ep.send(id, b"", b"ok");
        let mut got = [0u8; 6];
        (&a1).read_exact(&mut got).unwrap();
        assert_eq!(&got[4..], b"ok", "the established one is still served");
    }

    #[test]
    fn oversized_frame_closes_the_connection() {
        let mut ep = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap(), 100).unwrap();
        let mut raw = TcpStream::connect(ep.local_addr()).unwrap();
        raw.write_all(&1000u32.to_le_bytes()).unwrap();
        let mut out = Vec::new();
        assert!(matches!(next_event(&mut ep, &mut out), TcpEvent::Closed(_)));
        // The client sees the close too.
        let mut ch = TcpChannel::connect(ep.local_addr(), 10, Duration::from_secs(5)).unwrap();
        let TcpEvent::Frame(id) = ({
            ch.send(b"", b"hi").unwrap();
            next_event(&mut ep, &mut out)
        }) else {
            panic!()
        };
        ep.send(&id, &[0u8; 50], b"");
        let e = recv(&mut ch, &mut out).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
