//! The client end of a connection: [`ShmChannel`] sends a message into the call ring and hands back
//! the reply where it lies in the result ring.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use lowlat_wait::{spin_until, SpinPolicy, Spinner};

use crate::error::{io_err, ShmError};
use crate::ring::{record_len, Consumer, Producer, RingError, Wake};
use crate::segment::{Hello, Segment, Status, HELLO_LEN};
use lowlat_sys as sys;

/// A blocked waiter wakes at least this often to check that the peer is still alive: a dead
/// peer's futex never fires, so this bounds how late its death is noticed.
pub const LIVENESS_SLICE: Duration = Duration::from_millis(10);
/// A busy-polling waiter checks the liveness socket every this many polls (~1 ms).
const LIVENESS_POLLS: u32 = 1 << 15;

/// Client-side settings.
#[derive(Clone, Debug)]
pub struct ChannelConfig {
    /// How the client waits for results (and for room in its call ring).
    pub spin: SpinPolicy,
    /// How long `connect` waits for the server's handshake.
    pub connect_timeout: Duration,
    /// The largest reply accepted (larger ones break the connection).
    pub max_message: usize,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig { spin: SpinPolicy::Adaptive, connect_timeout: Duration::from_secs(5), max_message: 16 << 20 }
    }
}

/// One connection to a shared-memory server, used by one thread at a time (it is `Send`, not
/// `Sync`). Protocol-agnostic: messages are opaque bytes.
///
/// Usage: [`send`](Self::send) a request, then [`recv`](Self::recv) its reply; the reply's bytes
/// stay valid until the next `send` or `recv`, which releases them (the next call acknowledges
/// the previous result). [`try_recv`](Self::try_recv) and [`block`](Self::block) serve a caller
/// that runs its own wait loop.
#[derive(Debug)]
pub struct ShmChannel {
    calls: Producer,
    results: Consumer,
    spinner: Spinner,
    max_message: usize,
    broken: Option<String>,
    /// The liveness channel: stays open for the connection's life; hang-up means the server died.
    sock: UnixStream,
    _doorbell: OwnedFd,
    /// Rung by the server when it publishes a result while we are parked ([`Self::park`]).
    result_bell: sys::EventFd,
    seg: Segment,
}

impl ShmChannel {
    /// Connects to the server listening at `path` and maps the connection it hands over.
    pub fn connect(path: impl AsRef<Path>, config: ChannelConfig) -> Result<ShmChannel, ShmError> {
        // The send timeout also bounds connect itself (a server that stopped accepting leaves
        // connect blocked on its full backlog), so it is set before connecting.
        let sock =
            socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).map_err(io_err("connect"))?;
        sock.set_write_timeout(Some(config.connect_timeout)).map_err(io_err("connect"))?;
        sock.set_read_timeout(Some(config.connect_timeout)).map_err(io_err("connect"))?;
        let addr = socket2::SockAddr::unix(path.as_ref()).map_err(io_err("connect"))?;
        sock.connect(&addr).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ShmError::Timeout { op: "connect" },
            _ => ShmError::Io { op: "connect", source: e },
        })?;
        let sock = UnixStream::from(OwnedFd::from(sock));
        let mut buf = [0u8; HELLO_LEN + 1];
        let (n, fds) = sys::recv_with_fds(sock.as_raw_fd(), &mut buf).map_err(|e| {
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
                ShmError::Timeout { op: "connect" }
            } else {
                ShmError::Io { op: "connect handshake", source: e }
            }
        })?;
        if n == 0 {
            // The server died or stopped between accepting and handing over the connection.
            return Err(ShmError::PeerGone);
        }
        let hello = Hello::decode(&buf[..n]).map_err(|what| ShmError::Handshake { what })?;
        match hello.status {
            Status::Refused => return Err(ShmError::Refused { uid: hello.uid, gid: hello.gid }),
            Status::Busy => return Err(ShmError::Busy),
            Status::Accepted => {}
        }
        let [memfd, doorbell, result_bell]: [OwnedFd; 3] =
            fds.try_into().map_err(|_| ShmError::Handshake { what: "expected a memfd and two eventfds" })?;
        let seg = Segment::map(&memfd, hello.layout)
            .map_err(|_| ShmError::Handshake { what: "segment layout, size or seals invalid" })?;
        drop(memfd);
        Ok(ShmChannel {
            calls: Producer::new(seg.call(), Wake::Doorbell(doorbell.as_raw_fd())),
            // A server whose reply waits for room sleeps in epoll, on the doorbell.
            results: Consumer::new(seg.result(), config.max_message).ring_when_parked(doorbell.as_raw_fd()),
            spinner: Spinner::new(config.spin),
            max_message: config.max_message,
            broken: None,
            sock,
            _doorbell: doorbell,
            result_bell: sys::EventFd::from_owned(result_bell),
            seg,
        })
    }

    /// The largest message that travels as one record (larger ones are streamed).
    pub fn max_inline(&self) -> usize {
        self.calls.max_record()
    }

    /// How this channel waits now.
    pub fn spin_policy(&self) -> SpinPolicy {
        self.spinner.policy()
    }

    /// Changes how this channel waits from now on.
    pub fn set_spin_policy(&mut self, spin: SpinPolicy) {
        self.spinner = Spinner::new(spin);
    }

    /// Sends one message gathered from `parts`. Waits (spin, then block) for ring space only
    /// when the server is behind. A failure after part of a streamed message went out breaks
    /// the connection.
    pub fn send(&mut self, parts: &[&[u8]], deadline: Instant) -> Result<(), ShmError> {
        self.send_by(parts, || deadline)
    }

    /// [`send`](Self::send) bounded by `timeout` from the moment it finds the ring full: the
    /// clock is read only then, never on the fast path (a clock read costs ~25 ns in a VM, an
    /// eighth of a round trip on this transport).
    pub fn send_within(&mut self, parts: &[&[u8]], timeout: Duration) -> Result<(), ShmError> {
        self.send_by(parts, || Instant::now() + timeout)
    }

    /// [`send_within`](Self::send_within) for a message in two pieces (a header and a body),
    /// written straight into one record when it fits one and the ring has room now: the call
    /// path's common case, without the general path's gathering and size bookkeeping.
    #[inline]
    pub fn send_two_within(&mut self, first: &[u8], second: &[u8], timeout: Duration) -> Result<(), ShmError> {
        let len = first.len() + second.len();
        if self.broken.is_none() && len <= self.max_message && record_len(len) <= self.calls.ring().size() {
            self.results.release();
            let fill = |dst: &mut [u8]| {
                let (a, b) = dst.split_at_mut(first.len());
                a.copy_from_slice(first);
                b.copy_from_slice(second);
            };
            match self.calls.try_write_whole(len, fill) {
                Ok(true) => return Ok(()),
                Ok(false) => {} // no room yet: the general path waits for it
                Err(e) => return Err(self.mark_broken(e.into())),
            }
        }
        self.send_within(&[first, second], timeout)
    }

    /// Lends the call ring's free space (at most one record, and at most the channel's largest
    /// message) to build a message of yet unknown length where the server will read it:
    /// `build` returns how many bytes it wrote, sent then as one record, or `None` to send
    /// nothing (the space may be too small: send it otherwise). Never waits.
    #[inline]
    pub fn send_in_place(&mut self, build: impl FnOnce(&mut [u8]) -> Option<usize>) -> Result<Option<usize>, ShmError> {
        self.usable()?;
        self.results.release();
        match self.calls.write_in_place(self.max_message, build) {
            Ok(n) => Ok(n),
            Err(e @ RingError::TooLarge { .. }) => Err(e.into()),
            Err(e) => Err(self.mark_broken(e.into())),
        }
    }

    /// The message sent last, read back from the call ring, if it went as one record and
    /// nothing has been sent or lent since (see [`Producer::last_written`]): for a caller that
    /// must send it again (a call refused before it ran) and kept no copy.
    pub fn last_sent(&self) -> Option<&[u8]> {
        self.calls.last_written()
    }

    fn send_by(&mut self, parts: &[&[u8]], deadline: impl Fn() -> Instant) -> Result<(), ShmError> {
        self.usable()?;
        self.results.release();
        let sock = self.sock.as_raw_fd();
        let spinner = &mut self.spinner;
        let mut at = None;
        let r = self.calls.send(parts, self.max_message, |p, need| {
            let d = *at.get_or_insert_with(&deadline);
            wait_space(p, need, spinner, d, sock)
        });
        match r {
            Err(ShmError::Ring(RingError::TooLarge { .. })) | Ok(()) => r,
            Err(e) => Err(self.mark_broken(e)),
        }
    }

    /// Waits (spin, then block; never past `deadline`) for the next message from the server and
    /// returns it where it lies. A timeout leaves the connection usable; corruption or hang-up does
    /// not.
    pub fn recv(&mut self, deadline: Instant) -> Result<&[u8], ShmError> {
        self.usable()?;
        self.results.release();
        let sock = self.sock.as_raw_fd();
        let results = RefCell::new(&mut self.results);
        let mut polls = 0u32;
        let mid_message = self.spinner.mid_message_budget();
        let r = self.spinner.wait(
            Some(deadline),
            || {
                if results.borrow_mut().poll()? {
                    return Ok(Some(()));
                }
                polls = polls.wrapping_add(1);
                if polls & (LIVENESS_POLLS - 1) == 0 && sys::hung_up(sock) {
                    // A reply published before the server went is delivered first.
                    return if results.borrow_mut().poll()? { Ok(Some(())) } else { Err(ShmError::PeerGone) };
                }
                Ok(None)
            },
            |left| {
                if results.borrow().assembling() && spin_until(mid_message, || results.borrow().has_data()) {
                    return Ok(());
                }
                let slice = left.map_or(LIVENESS_SLICE, |l| l.min(LIVENESS_SLICE));
                let t = Instant::now();
                results.borrow().block_for_data(slice);
                check_alive_after(t, slice, sock, || results.borrow().has_data())
            },
        );
        match r {
            Ok(Some(())) => Ok(self.results.message()),
            Ok(None) => Err(ShmError::Timeout { op: "recv" }),
            Err(e) => Err(self.mark_broken(e)),
        }
    }

    /// Returns the next message if one is complete now, without waiting (for a caller running
    /// its own spin-then-block loop; pair with [`block`](Self::block)).
    #[inline]
    pub fn try_recv(&mut self) -> Result<Option<&[u8]>, ShmError> {
        self.usable()?;
        self.results.release();
        match self.results.poll() {
            Ok(true) => Ok(Some(self.results.message())),
            Ok(false) => Ok(None),
            Err(e) => Err(self.mark_broken(e.into())),
        }
    }

    /// Whether a reply may be published (a look that takes nothing, for a caller deciding whether
    /// to look with [`try_recv`](Self::try_recv); it may say yes for one already received).
    pub fn has_reply(&self) -> bool {
        self.results.has_data()
    }

    /// The message the last [`recv`](Self::recv) or [`try_recv`](Self::try_recv) returned,
    /// still where it lies (empty once the next send or receive has released it).
    pub fn received(&self) -> &[u8] {
        self.results.message()
    }

    /// Sleeps until the server may have published a message, at most `timeout` (and at most
    /// [`LIVENESS_SLICE`], after which the liveness socket is checked: a dead server is
    /// reported as [`ShmError::PeerGone`]).
    pub fn block(&mut self, timeout: Option<Duration>) -> Result<(), ShmError> {
        self.usable()?;
        // The rest of a message half read is a copy away: sleeping here cost a wake-up per chunk.
        if self.results.assembling() && spin_until(self.spinner.mid_message_budget(), || self.results.has_data()) {
            return Ok(());
        }
        let slice = timeout.map_or(LIVENESS_SLICE, |t| t.min(LIVENESS_SLICE));
        let t = Instant::now();
        self.results.block_for_data(slice);
        let alive = check_alive_after(t, slice, self.sock.as_raw_fd(), || self.results.has_data());
        alive.map_err(|e| self.mark_broken(e))
    }

    /// Prepares to wait for a result in an event loop rather than on the futex: empties the
    /// result eventfd ([`result_bell`](Self::result_bell)), then asks the server to ring it when
    /// it publishes. Returns whether a message is there already (then read it with
    /// [`try_recv`](Self::try_recv) instead of waiting). Every wait ends with
    /// [`unpark`](Self::unpark). A server's death shows as the liveness socket
    /// ([`liveness_fd`](Self::liveness_fd)) turning readable.
    pub fn park(&mut self) -> Result<bool, ShmError> {
        self.usable()?;
        self.result_bell.drain();
        Ok(self.results.park())
    }

    /// Ends a wait begun by [`park`](Self::park). Looks at the liveness socket when `timed_out`
    /// (a dead server rings nothing).
    pub fn unpark(&mut self, timed_out: bool) -> Result<(), ShmError> {
        self.results.unpark();
        if timed_out && sys::hung_up(self.sock.as_raw_fd()) && !self.results.has_data() {
            return Err(self.mark_broken(ShmError::PeerGone));
        }
        Ok(())
    }

    /// The eventfd the server rings for a parked wait.
    pub fn result_bell(&self) -> RawFd {
        self.result_bell.as_raw_fd()
    }

    /// `send` then `recv`.
    pub fn call(&mut self, parts: &[&[u8]], deadline: Instant) -> Result<&[u8], ShmError> {
        self.send(parts, deadline)?;
        self.recv(deadline)
    }

    /// The producing end of the call ring, bypassing this channel's framing: for tests that play
    /// a misbehaving client (say, one that stops half way through a streamed message).
    pub fn raw_calls(&mut self) -> &mut Producer {
        &mut self.calls
    }

    /// The mapped segment, for tests that play a misbehaving client.
    pub fn segment(&self) -> &Segment {
        &self.seg
    }

    /// The liveness socket's descriptor (for a caller that multiplexes connections with poll).
    pub fn liveness_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    #[inline]
    fn usable(&self) -> Result<(), ShmError> {
        match &self.broken {
            Some(why) => Err(ShmError::Broken(why.clone())),
            None => Ok(()),
        }
    }

    fn mark_broken(&mut self, e: ShmError) -> ShmError {
        self.broken = Some(e.to_string());
        e
    }
}

/// After a blocking slice: if it ran its full length (no wake-up seen), look at the liveness
/// socket. A hang-up counts only once `pending` finds nothing left to read: a reply published
/// before the server went is delivered, even to a waiter that was woken for it but ran only
/// after the slice's length (a starved CPU) and after the server had exited.
fn check_alive_after(
    start: Instant,
    slice: Duration,
    sock: RawFd,
    pending: impl FnOnce() -> bool,
) -> Result<(), ShmError> {
    if start.elapsed() >= slice && sys::hung_up(sock) && !pending() {
        return Err(ShmError::PeerGone);
    }
    Ok(())
}

/// Waits until `need` bytes are free in `p`'s ring: spin (at least the spinner's mid-message
/// budget: a ring waited on for space holds the message being streamed), then sleep on the
/// consumer index.
pub(crate) fn wait_space(
    p: &mut Producer,
    need: usize,
    spinner: &mut Spinner,
    deadline: Instant,
    sock: RawFd,
) -> Result<(), ShmError> {
    let p = RefCell::new(p);
    let mut polls = 0u32;
    let mid_message = spinner.mid_message_budget();
    let r = spinner.wait(
        Some(deadline),
        || {
            if p.borrow_mut().has_room(need)? {
                return Ok(Some(()));
            }
            polls = polls.wrapping_add(1);
            if polls & (LIVENESS_POLLS - 1) == 0 && sys::hung_up(sock) {
                return Err(ShmError::PeerGone);
            }
            Ok(None)
        },
        |left| {
            // The server is reading the message this streams, a copy away: sleeping here cost
            // a wake-up per chunk. (An error is left for the next look to report.)
            if spin_until(mid_message, || p.borrow_mut().has_room(need).unwrap_or(true)) {
                return Ok(());
            }
            let slice = left.map_or(LIVENESS_SLICE, |l| l.min(LIVENESS_SLICE));
            let t = Instant::now();
            p.borrow_mut().block_for_space(slice);
            check_alive_after(t, slice, sock, || false)
        },
    )?;
    r.ok_or(ShmError::Timeout { op: "send (waiting for ring space)" })
}
