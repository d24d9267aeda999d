//! The server end: [`ShmServer`] listens at `shm://PATH` and one thread drives it, serving many
//! connections.
//!
//! The thread polls the call rings of *active* connections. A connection idle for longer than the spin
//! budget and a millisecond (`COOL_AFTER`; the budget alone past `KEEP_ACTIVE` active connections) is
//! *armed*: its "consumer sleeping" flag is set, the server stops polling it, and its client rings the
//! connection's doorbell (an eventfd handed over with the memfd) on its next call. A server with
//! nothing to serve for its spin budget arms every connection and sleeps in `epoll_wait` on the
//! doorbells, the liveness sockets and the listener: no CPU is burnt, yet any call wakes it. Idle
//! connections therefore cost the active ones nothing on the polling path.
//!
//! A reply its result ring has no room for (a large one, or a client slow to read) is kept with
//! the connection and written as the client frees room, the thread serving the other connections
//! meanwhile; the connection's next calls wait in its call ring until then. A server with only
//! such replies to write sleeps too: the client rings the connection's doorbell when it frees room.
//!
//! A connection is closed (unmapped, descriptors closed) when its client hangs up, corrupts its
//! rings, sends more than `max_message`, or frees no room for a reply for `stall_limit`. None
//! of these stops the thread from serving the other connections.
//!
//! [`config`]: who may bind and how; `accept`: the acceptor, which turns a connection into a
//! connection; `poll`: the poller, which serves the connections; [`reply`]: replies written into a
//! result ring; `group`: several servers of one path, a thread each, handing connections to one
//! another.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use lowlat_sys::{self as sys, Epoll};
use lowlat_wait::Spinner;

use crate::error::{io_err, ShmError};
use crate::listen::{listen, remove_if_ours};
use crate::ring::{Consumer, Producer};
use crate::segment::Segment;

mod accept;
pub mod config;
mod group;
mod poll;
pub mod reply;

pub use config::{PeerPolicy, ShmServerConfig};
pub use reply::Reply;

/// Names a connection for its whole life, unique across a group; reused for a later connection
/// in the same slot only after 16M more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnectionId {
    index: u32,
    /// The slot's generation (24 bits, so a slot's id comes back after 16M connections in it)
    /// under the number of the group's member serving it (`ShmServer::bind_group`): ids are
    /// unique across the group, and 8 bytes, as the call path copies and compares them.
    generation: u32,
}

impl ConnectionId {
    /// The id of the connection in slot `index` at the slot's `generation`, on `member`.
    fn new(index: u32, generation: u32, member: u16) -> ConnectionId {
        ConnectionId { index, generation: generation & 0xFF_FFFF | u32::from(member) << 24 }
    }
}

/// A client's credentials as the kernel reported them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// The client's user id.
    pub uid: u32,
    /// The client's primary group id.
    pub gid: u32,
    /// The client's process id, as the kernel reported it (in the server's pid namespace).
    pub pid: i32,
}

/// What the server thread calls. Only `call` is required; closures
/// `FnMut(ConnectionId, &[u8], Reply)` implement it.
pub trait ShmHandler {
    /// One request, where it lies in the call ring (or reassembled, if streamed). The bytes are
    /// the client's to change at any moment: validate before trusting. Reply through `reply`
    /// now, or later with [`ShmServer::reply`]; dropping it sends nothing.
    fn call(&mut self, connection: ConnectionId, request: &[u8], reply: Reply<'_>);
    /// A connection was made with this client.
    fn opened(&mut self, _connection: ConnectionId, _peer: PeerCred) {}
    /// This connection is gone (hung up, misbehaved, or stalled); its id is not used again.
    fn closed(&mut self, _connection: ConnectionId, _why: &ShmError) {}
    /// A client was turned away by the [`PeerPolicy`].
    fn refused(&mut self, _peer: PeerCred) {}
}

impl<F: FnMut(ConnectionId, &[u8], Reply<'_>)> ShmHandler for F {
    fn call(&mut self, connection: ConnectionId, request: &[u8], reply: Reply<'_>) {
        self(connection, request, reply)
    }
}

/// What [`ShmServer::serve_next`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity<R> {
    /// Served a request from this connection; what the serving function returned.
    Request(ConnectionId, R),
    /// This connection is gone (hung up, misbehaved, or stalled).
    Closed(ConnectionId),
}

/// Collects closures for the pull-style API, which reports them from `serve_next`.
struct Recorder(std::collections::VecDeque<ConnectionId>);

impl ShmHandler for Recorder {
    fn call(&mut self, _: ConnectionId, _: &[u8], _: Reply<'_>) {}
    fn closed(&mut self, connection: ConnectionId, _why: &ShmError) {
        self.0.push_back(connection);
    }
}

pub(super) struct Connection {
    id: ConnectionId,
    calls: Consumer,
    results: Producer,
    /// Whether the connection sleeps (its flag set, served only after its doorbell rings).
    armed: bool,
    /// When it last called, by the server's clock (read only every 64 polls, so it lags).
    last_active: Instant,
    /// Whether it called since the last idleness check. `last_active` alone lags by up to one
    /// clock-reading interval, which on a slow VM approaches the spin budget: a connection calling
    /// every few microseconds was armed (put to sleep) now and then, and its next call paid a
    /// wake-up.
    called_since_check: bool,
    /// Replies its result ring had no room for; its calls wait until they are written.
    unsent: reply::Unsent,
    /// What its reassembly buffer held when last counted ([`Consumer::held`]).
    grown: usize,
    peer: PeerCred,
    sock: UnixStream,
    doorbell: sys::EventFd,
    /// The eventfd `results` rings for a client parked in an event loop (kept open while the
    /// producer holds its number).
    _result_bell: sys::EventFd,
    _seg: Segment,
}

impl Connection {
    fn sleeping_flag(&self) -> &AtomicU32 {
        &self.calls.ring().ctl().consumer_sleeping.v
    }

    /// Notes a call served at `now` (the server's lagging clock); returns how long the connection
    /// was idle before it, for the adaptive budget.
    #[inline]
    fn called(&mut self, now: Instant) -> Duration {
        // The clock is read every 64 polls, so calls in a row mostly see the moment the last
        // saw: idle zero, without the subtraction of two instants (~40 instructions a call).
        if now == self.last_active {
            self.called_since_check = true;
            return Duration::ZERO;
        }
        let idle = now.saturating_duration_since(self.last_active);
        self.last_active = now;
        self.called_since_check = true;
        idle
    }

    /// Polled again from `now` if it was armed (its flag cleared: its client need not ring);
    /// returns how long it had been idle then, or `None` if it was not armed (already polled).
    fn disarm(&mut self, now: Instant) -> Option<Duration> {
        if !self.armed {
            return None;
        }
        self.sleeping_flag().store(0, std::sync::atomic::Ordering::SeqCst);
        self.armed = false;
        let idle = now.saturating_duration_since(self.last_active);
        self.last_active = now;
        Some(idle)
    }

    /// At an idleness check: a connection that called since the last one counts as active now.
    fn settle(&mut self, now: Instant) {
        if std::mem::take(&mut self.called_since_check) {
            self.last_active = now;
        }
    }
}

/// Kind 0: the server's own descriptors (the listener, tag 0; a member's inbox,
/// `group::TAG_INBOX`).
const TAG_LISTENER: u64 = 0;
const TAG_DOORBELL: u64 = 1;
const TAG_SOCKET: u64 = 2;
const TAG_WATCHED: u64 = 3;

fn tag(kind: u64, id: ConnectionId) -> u64 {
    (id.generation as u64) << 32 | (id.index as u64) << 2 | kind
}

/// Busy-polling: a connection idle this long is polled every 64th pass. Spinning: a connection idle
/// this long is armed, even while the server spins (see `KEEP_ACTIVE`).
const COOL_AFTER: Duration = Duration::from_millis(1);

/// While any connection is active, epoll is also checked (accepts, hang-ups, doorbells of armed
/// connections) about this often.
const EVENT_CHECK: Duration = Duration::from_micros(50);

/// A spinning server with at most this many active connections keeps each polled (its client's
/// calls found without a doorbell) until it has been quiet for `COOL_AFTER`, not only for the spin
/// budget: as many as one client's default slots, each a connection. With more, a connection
/// quiet for the budget is armed, so that quiet ones do not lengthen every pass.
const KEEP_ACTIVE: usize = 64;

/// A shared-memory server: the listening socket plus every live connection. Driven by one thread
/// through [`poll`](Self::poll) or [`run`](Self::run); several, one per thread, share a path as a
/// group ([`bind_group`](Self::bind_group)).
pub struct ShmServer {
    slots: Vec<Option<Connection>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    /// Indices of connections not armed: the ones the polling loop looks at.
    active: Vec<u32>,
    /// Busy-polling only: connections idle past `COOL_AFTER`, looked at every 64th pass instead of
    /// every pass (no doorbell: a busy-polling client makes no system calls), so that idle
    /// connections cost the active ones little.
    cool: Vec<u32>,
    /// Pull-style use: where the next `serve_next` scan starts (round robin), how many scans
    /// were made, and connections closed but not yet reported.
    next: usize,
    scans: u32,
    closed: std::collections::VecDeque<ConnectionId>,
    spinner: Spinner,
    now: Instant,
    last_event_check: Instant,
    events: Vec<libc::epoll_event>,
    config: ShmServerConfig,
    epoll: Epoll,
    /// The listening socket and the (device, inode) of the socket file we created (removed on
    /// drop only if still ours); none in a group's members after the first.
    listener: Option<(UnixListener, (u64, u64))>,
    path: PathBuf,
    /// Connections closed because their client broke the rings (a corrupt index or record).
    corrupt: u64,
    /// The servers of this path (a group of one when bound alone), and which this is.
    group: std::sync::Arc<group::Group>,
    member: u16,
    /// The member the next connection admitted goes to (`group::place`).
    next_member: usize,
    /// Connections with replies their result ring had no room for (`reply::Unsent`), written
    /// as their clients free room, and the bytes kept for them.
    backlogged: Vec<u32>,
    kept: usize,
    /// What the connections' reassembly buffers hold, as last counted (`Connection::grown`).
    grown: usize,
}

impl std::fmt::Debug for ShmServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmServer")
            .field("path", &self.path)
            .field("connections", &self.connection_count())
            .field("active", &self.active.len())
            .finish()
    }
}

impl ShmServer {
    /// Listens at `path` (a stale socket left by a dead server is replaced; anything else there
    /// is refused).
    pub fn bind(path: impl AsRef<Path>, config: ShmServerConfig) -> Result<ShmServer, ShmError> {
        let path = path.as_ref().to_path_buf();
        config
            .layout
            .validate()
            .map_err(|e| ShmError::Io { op: "listen", source: io::Error::new(io::ErrorKind::InvalidInput, e) })?;
        let (listener, file_id) = listen(&path, config.mode)?;
        listener.set_nonblocking(true).map_err(io_err("listen"))?;
        let epoll = Epoll::new().map_err(io_err("epoll"))?;
        epoll.add(listener.as_raw_fd(), libc::EPOLLIN as u32, TAG_LISTENER).map_err(io_err("epoll"))?;
        let group = group::Group::alone()?;
        Ok(ShmServer::unbound(path, config, epoll, Some((listener, file_id)), group))
    }

    /// A server of `path` watching `epoll`, with no connection yet.
    fn unbound(
        path: PathBuf,
        config: ShmServerConfig,
        epoll: Epoll,
        listener: Option<(UnixListener, (u64, u64))>,
        group: std::sync::Arc<group::Group>,
    ) -> ShmServer {
        let now = Instant::now();
        ShmServer {
            slots: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            active: Vec::new(),
            cool: Vec::new(),
            next: 0,
            scans: 0,
            closed: std::collections::VecDeque::new(),
            spinner: Spinner::new(config.spin),
            now,
            last_event_check: now,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            config,
            epoll,
            listener,
            path,
            corrupt: 0,
            group,
            member: 0,
            next_member: 0,
            backlogged: Vec::new(),
            kept: 0,
            grown: 0,
        }
    }

    /// The socket path the server listens on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections currently open on this server, active or armed.
    pub fn connection_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Connections currently polled (not asleep).
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Whether `connection` is open and polled (not armed, its client's calls found without its
    /// doorbell).
    pub fn is_active(&self, connection: ConnectionId) -> bool {
        matches!(self.slots.get(connection.index as usize), Some(Some(b)) if b.id == connection && !b.armed)
    }

    /// Bytes of replies kept for clients slow to read them, across this server's connections
    /// (at most [`max_kept`](ShmServerConfig::max_kept) but for deferred replies queued behind
    /// them).
    pub fn kept_bytes(&self) -> usize {
        self.kept
    }

    /// Bytes of reassembly buffers kept between requests, across this server's connections (at
    /// most [`max_grown`](ShmServerConfig::max_grown)).
    pub fn grown_bytes(&self) -> usize {
        self.grown
    }

    /// Connections closed so far because their client broke the rings (a hostile or crashed peer).
    pub fn corrupt_connections(&self) -> u64 {
        self.corrupt
    }

    /// The credentials of a live connection's client.
    pub fn peer(&self, connection: ConnectionId) -> Option<PeerCred> {
        match self.slots.get(connection.index as usize) {
            Some(Some(b)) if b.id == connection => Some(b.peer),
            _ => None,
        }
    }
}

impl Drop for ShmServer {
    fn drop(&mut self) {
        if let Some((_, file_id)) = self.listener {
            remove_if_ours(&self.path, file_id);
        }
    }
}
