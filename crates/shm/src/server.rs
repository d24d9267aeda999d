//! The server end: [`ShmServer`] listens at `shm://PATH` and one thread drives it, serving many
//! bindings.
//!
//! The thread polls the call rings of *active* bindings. A binding idle for longer than the spin
//! budget is *armed*: its "consumer sleeping" flag is set, the server stops polling it, and its
//! client rings the binding's doorbell (an eventfd handed over with the memfd) on its next call.
//! When every binding is armed the thread sleeps in `epoll_wait` on the doorbells, the liveness
//! sockets and the listener: no CPU is burnt, yet any call wakes it. Idle bindings therefore cost
//! the active ones nothing on the polling path.
//!
//! A binding is closed (unmapped, descriptors closed) when its client hangs up, corrupts its
//! rings, sends more than `max_message`, or leaves no room for a reply for `stall_limit`. None
//! of these can stop the thread from serving the other bindings for longer than `stall_limit`.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lowlat_transport::{SpinPolicy, Spinner};

use crate::error::{io_err, ShmError};
use crate::ring::{record_len, Consumer, Producer, RingError, Wake};
use crate::segment::{Hello, Layout, Segment, Status};
use lowlat_sys::{self as sys, Epoll};

/// Who may bind. A peer is allowed when its uid or its primary gid is listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPolicy {
    /// Users allowed, by uid.
    pub uids: Vec<u32>,
    /// Groups allowed, by primary gid.
    pub gids: Vec<u32>,
}

impl PeerPolicy {
    /// Only the server's own effective user (the default).
    pub fn same_user() -> PeerPolicy {
        PeerPolicy { uids: vec![sys::effective_uid()], gids: vec![] }
    }

    /// The peer with these credentials may bind.
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }
}

/// Server-side settings.
#[derive(Clone, Debug)]
pub struct ShmServerConfig {
    /// Permissions of the socket file.
    pub mode: u32,
    /// Who may bind (default: the server's own user).
    pub policy: PeerPolicy,
    /// Ring sizes of every binding.
    pub layout: Layout,
    /// The largest request accepted (larger ones close the binding).
    pub max_message: usize,
    /// How the server thread waits for calls before arming a binding and sleeping.
    pub spin: SpinPolicy,
    /// How long a reply may wait for room in a client's result ring before the binding is
    /// dropped: the most one misbehaving client can delay the others.
    pub stall_limit: Duration,
    /// Connections beyond this many bindings are refused as busy.
    pub max_bindings: usize,
}

impl Default for ShmServerConfig {
    fn default() -> Self {
        ShmServerConfig {
            mode: 0o600,
            policy: PeerPolicy::same_user(),
            layout: Layout { call_ring: 64 << 10, result_ring: 64 << 10 },
            max_message: 16 << 20,
            spin: SpinPolicy::Adaptive,
            stall_limit: Duration::from_millis(100),
            max_bindings: 4096,
        }
    }
}

/// Names a binding for its whole life; never reused for a later binding in the same slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindingId {
    index: u32,
    generation: u32,
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
/// `FnMut(BindingId, &[u8], Reply)` implement it.
pub trait ShmHandler {
    /// One request, where it lies in the call ring (or reassembled, if streamed). The bytes are
    /// the client's to change at any moment: validate before trusting. Reply through `reply`
    /// now, or later with [`ShmServer::reply`]; dropping it sends nothing.
    fn call(&mut self, binding: BindingId, request: &[u8], reply: Reply<'_>);
    /// A binding was made with this client.
    fn opened(&mut self, _binding: BindingId, _peer: PeerCred) {}
    /// This binding is gone (hung up, misbehaved, or stalled); its id is not used again.
    fn closed(&mut self, _binding: BindingId, _why: &ShmError) {}
    /// A client was turned away by the [`PeerPolicy`].
    fn refused(&mut self, _peer: PeerCred) {}
}

impl<F: FnMut(BindingId, &[u8], Reply<'_>)> ShmHandler for F {
    fn call(&mut self, binding: BindingId, request: &[u8], reply: Reply<'_>) {
        self(binding, request, reply)
    }
}

/// What [`ShmServer::serve_next`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity<R> {
    /// Served a request from this binding; what the serving function returned.
    Request(BindingId, R),
    /// This binding is gone (hung up, misbehaved, or stalled).
    Closed(BindingId),
}

/// Collects closures for the pull-style API, which reports them from `serve_next`.
struct Recorder(std::collections::VecDeque<BindingId>);

impl ShmHandler for Recorder {
    fn call(&mut self, _: BindingId, _: &[u8], _: Reply<'_>) {}
    fn closed(&mut self, binding: BindingId, _why: &ShmError) {
        self.0.push_back(binding);
    }
}

/// Writes one reply straight into a binding's result ring.
pub struct Reply<'a> {
    results: &'a mut Producer,
    cfg: &'a ShmServerConfig,
    sock: i32,
    failed: &'a mut Option<ShmError>,
}

impl Reply<'_> {
    /// The largest reply [`send_with`](Self::send_with) builds in place.
    pub fn max_inline(&self) -> usize {
        self.results.max_record()
    }

    /// Sends the reply gathered from `parts` (streamed if larger than the ring).
    pub fn send(mut self, parts: &[&[u8]]) -> Result<(), ShmError> {
        let r = send_reply(self.results, self.cfg, self.sock, parts);
        self.note(r)
    }

    /// Sends a reply of `len` bytes that `fill` writes where it will be read. Replies larger
    /// than [`max_inline`](Self::max_inline) are built in a buffer and streamed.
    pub fn send_with(mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), ShmError> {
        if len > self.results.max_record() {
            let mut v = vec![0u8; len];
            fill(&mut v);
            return self.send(&[&v]);
        }
        if len > self.cfg.max_message {
            return Err(RingError::TooLarge { len, max: self.cfg.max_message }.into());
        }
        let need = record_len(len);
        let r = (|| {
            if !self.results.has_room(need)? {
                let deadline = Instant::now() + self.cfg.stall_limit;
                let mut spinner = Spinner::new(self.cfg.spin);
                crate::channel::wait_space(self.results, need, &mut spinner, deadline, self.sock)
                    .map_err(|e| stall(e, self.cfg))?;
            }
            // Room only grows while we wait (the consumer frees, never takes), so this writes.
            if self.results.try_write_whole(len, fill)? {
                Ok(())
            } else {
                Err(RingError::Corrupt { what: "consumer index lost room already seen" }.into())
            }
        })();
        self.note(r)
    }

    /// Lends the result ring's free space to build a reply of yet unknown length where the
    /// client will read it: `build` returns how many bytes it wrote, sent then, or `None` to
    /// send nothing this way (the `Reply` can still send). Never waits: a reply that does not
    /// fit the space lent is the builder's to send otherwise.
    pub fn build_in_place(
        &mut self,
        build: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, ShmError> {
        match self.results.write_in_place(self.cfg.max_message, build) {
            Ok(n) => Ok(n),
            Err(e) => self.note(Err(e.into())).map(|()| None),
        }
    }

    fn note(&mut self, r: Result<(), ShmError>) -> Result<(), ShmError> {
        match r {
            Err(ShmError::Ring(RingError::TooLarge { len, max })) => {
                Err(ShmError::Ring(RingError::TooLarge { len, max }))
            }
            Err(e) => {
                let msg = e.to_string();
                *self.failed = Some(e);
                Err(ShmError::Broken(msg))
            }
            Ok(()) => Ok(()),
        }
    }
}

fn stall(e: ShmError, cfg: &ShmServerConfig) -> ShmError {
    match e {
        ShmError::Timeout { .. } => ShmError::Stalled { waited_ms: cfg.stall_limit.as_millis() as u64 },
        e => e,
    }
}

fn send_reply(results: &mut Producer, cfg: &ShmServerConfig, sock: i32, parts: &[&[u8]]) -> Result<(), ShmError> {
    // The clock is read only if the reply has to wait: not on the fast path.
    let mut deadline = None;
    let mut spinner = Spinner::new(cfg.spin);
    results.send(parts, cfg.max_message, |p, need| {
        let d = *deadline.get_or_insert_with(|| Instant::now() + cfg.stall_limit);
        crate::channel::wait_space(p, need, &mut spinner, d, sock).map_err(|e| stall(e, cfg))
    })
}

struct Binding {
    id: BindingId,
    calls: Consumer,
    results: Producer,
    /// Whether the binding sleeps (its flag set, served only after its doorbell rings).
    armed: bool,
    /// When it last called, by the server's clock (read only every 64 polls, so it lags).
    last_active: Instant,
    /// Whether it called since the last idleness check. `last_active` alone lags by up to one
    /// clock-reading interval, which on a slow VM approaches the spin budget: a binding calling
    /// every few microseconds was armed (put to sleep) now and then, and its next call paid a
    /// wake-up.
    called_since_check: bool,
    peer: PeerCred,
    sock: UnixStream,
    doorbell: sys::EventFd,
    /// The eventfd `results` rings for a client parked in an event loop (kept open while the
    /// producer holds its number).
    _result_bell: sys::EventFd,
    _seg: Segment,
}

impl Binding {
    fn sleeping_flag(&self) -> &AtomicU32 {
        &self.calls.ring().ctl().consumer_sleeping.v
    }

    /// Notes a call served at `now` (the server's lagging clock); returns how long the binding
    /// was idle before it, for the adaptive budget.
    fn called(&mut self, now: Instant) -> Duration {
        let idle = now.saturating_duration_since(self.last_active);
        self.last_active = now;
        self.called_since_check = true;
        idle
    }

    /// At an idleness check: a binding that called since the last one counts as active now.
    fn settle(&mut self, now: Instant) {
        if std::mem::take(&mut self.called_since_check) {
            self.last_active = now;
        }
    }
}

const TAG_LISTENER: u64 = 0;
const TAG_DOORBELL: u64 = 1;
const TAG_SOCKET: u64 = 2;
const TAG_WATCHED: u64 = 3;

fn tag(kind: u64, id: BindingId) -> u64 {
    (id.generation as u64) << 32 | (id.index as u64) << 2 | kind
}

/// Busy-polling only: a binding idle this long is polled every 64th pass.
const COOL_AFTER: Duration = Duration::from_millis(1);

/// While any binding is active, epoll is also checked (accepts, hang-ups, doorbells of armed
/// bindings) about this often.
const EVENT_CHECK: Duration = Duration::from_micros(50);

/// A shared-memory server: the listening socket plus every live binding. Driven by one thread
/// through [`poll`](Self::poll) or [`run`](Self::run).
pub struct ShmServer {
    slots: Vec<Option<Binding>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    /// Indices of bindings not armed: the ones the polling loop looks at.
    active: Vec<u32>,
    /// Busy-polling only: bindings idle past `COOL_AFTER`, looked at every 64th pass instead of
    /// every pass (no doorbell: a busy-polling client makes no system calls), so that idle
    /// bindings cost the active ones little.
    cool: Vec<u32>,
    /// Pull-style use: where the next `serve_next` scan starts (round robin), how many scans
    /// were made, and bindings closed but not yet reported.
    next: usize,
    scans: u32,
    closed: std::collections::VecDeque<BindingId>,
    spinner: Spinner,
    now: Instant,
    last_event_check: Instant,
    events: Vec<libc::epoll_event>,
    config: ShmServerConfig,
    epoll: Epoll,
    listener: UnixListener,
    path: PathBuf,
    /// (device, inode) of the socket file we created: removed on drop only if still ours.
    file_id: (u64, u64),
    /// Bindings closed because their client broke the rings (a corrupt index or record).
    corrupt: u64,
}

impl std::fmt::Debug for ShmServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmServer")
            .field("path", &self.path)
            .field("bindings", &self.binding_count())
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
        let now = Instant::now();
        Ok(ShmServer {
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
            file_id,
            corrupt: 0,
        })
    }

    /// The socket path the server listens on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bindings currently open, active or armed.
    pub fn binding_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Bindings currently polled (not asleep).
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Serves requests until `stop` is set (checked at least every 50 ms).
    pub fn run(&mut self, handler: &mut impl ShmHandler, stop: &AtomicBool) -> Result<(), ShmError> {
        while !stop.load(Ordering::Relaxed) {
            self.poll(handler, Some(Duration::from_millis(50)))?;
        }
        Ok(())
    }

    /// Serves whatever is ready; if nothing is, spins for the budget and then sleeps, returning
    /// after serving at least one request or when `timeout` passes (`None`: no limit). Returns
    /// the number of requests served. Errors only when the server itself fails (epoll);
    /// per-binding failures close that binding and are reported to `ShmHandler::closed`.
    pub fn poll(&mut self, handler: &mut impl ShmHandler, timeout: Option<Duration>) -> Result<usize, ShmError> {
        self.now = Instant::now();
        let deadline = timeout.map(|t| self.now + t);
        let mut passes = 0u32;
        // With no spin budget, bindings are armed as soon as they are found empty: every call
        // then comes through the doorbell (the blocking mode), none is caught by a stray poll.
        let no_spin = self.spinner.budget() == Some(Duration::ZERO);
        loop {
            let served = self.serve_active(handler);
            if served > 0 {
                return Ok(served);
            }
            passes = passes.wrapping_add(1);
            if no_spin || passes & 63 == 0 || self.active.is_empty() {
                self.now = Instant::now();
                self.arm_idle();
                if self.active.is_empty() && self.cool.is_empty() {
                    let left = deadline.map(|d| d.saturating_duration_since(self.now));
                    self.process_events(handler, left)?;
                    self.now = Instant::now();
                    self.last_event_check = self.now;
                } else if self.now - self.last_event_check >= EVENT_CHECK {
                    self.process_events(handler, Some(Duration::ZERO))?;
                    self.last_event_check = self.now;
                }
                if deadline.is_some_and(|d| self.now >= d) {
                    return Ok(self.serve_active(handler));
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Sends a deferred reply on `binding` (for a request whose `Reply` was dropped). A failure
    /// closes the binding.
    pub fn reply(
        &mut self,
        handler: &mut impl ShmHandler,
        binding: BindingId,
        parts: &[&[u8]],
    ) -> Result<(), ShmError> {
        let b = match self.slots.get_mut(binding.index as usize) {
            Some(Some(b)) if b.id == binding => b,
            _ => return Err(ShmError::PeerGone),
        };
        let sock = b.sock.as_raw_fd();
        match send_reply(&mut b.results, &self.config, sock, parts) {
            Err(e @ ShmError::Ring(RingError::TooLarge { .. })) => Err(e),
            Err(e) => {
                let msg = e.to_string();
                self.close(binding.index, e, handler);
                Err(ShmError::Broken(msg))
            }
            Ok(()) => Ok(()),
        }
    }

    /// Closes a binding from the server side.
    pub fn disconnect(&mut self, handler: &mut impl ShmHandler, binding: BindingId) {
        if self.binding_mut(binding).is_some() {
            self.close(binding.index, ShmError::Broken("closed by the server".into()), handler);
        }
    }

    /// Adds a descriptor whose readability ends [`block`](Self::block) (for example the
    /// caller's own eventfd for completions from worker threads). It is never read here.
    pub fn watch(&mut self, fd: std::os::fd::RawFd) -> Result<(), ShmError> {
        self.epoll.add(fd, libc::EPOLLIN as u32, TAG_WATCHED).map_err(io_err("epoll watch"))
    }

    /// Pull-style serving, for a caller that runs its own spin-then-block loop (the runtime):
    /// finds the next request of any binding without blocking and serves it at once: `f` reads
    /// it where it lies in the call ring and may answer through the [`Reply`], which writes into
    /// the same binding's result ring; the request's ring space is freed afterwards. Bindings
    /// are scanned round robin, so a busy client cannot starve the others. The scan's own
    /// bookkeeping (idleness, the adaptive budget) is done after the reply is out, off the
    /// round trip's path. A binding that could not take its reply is closed and reported by a
    /// later call. Sleep with [`block`](Self::block) when this finds nothing.
    pub fn serve_next<R>(&mut self, f: impl FnOnce(BindingId, &[u8], Reply<'_>) -> R) -> Option<Activity<R>> {
        if let Some(id) = self.closed.pop_front() {
            return Some(Activity::Closed(id));
        }
        self.scans = self.scans.wrapping_add(1);
        if self.scans & 63 == 0 {
            self.now = Instant::now();
            self.arm_idle();
            if self.now - self.last_event_check >= EVENT_CHECK {
                self.last_event_check = self.now;
                let mut q = Recorder(std::mem::take(&mut self.closed));
                // An epoll failure here resurfaces in `block`, which reports it.
                let _ = self.process_events(&mut q, Some(Duration::ZERO));
                self.closed = q.0;
            }
        }
        let n = self.active.len();
        if self.next >= n {
            self.next = 0; // the active list shrank
        }
        for k in 0..n {
            // No `%`: a division on every poll of a spinning server is measurable.
            let i = if self.next + k >= n { self.next + k - n } else { self.next + k };
            let idx = self.active[i] as usize;
            let Some(b) = self.slots[idx].as_mut() else {
                continue;
            };
            match b.calls.poll() {
                Ok(false) => {}
                Ok(true) => {
                    let id = b.id;
                    let (r, failed) = serve_held(b, &self.config, f);
                    self.spinner.observe(b.called(self.now));
                    self.next = i + 1;
                    if let Some(e) = failed {
                        self.close_quietly(idx as u32, e);
                    }
                    return Some(Activity::Request(id, r));
                }
                Err(e) => {
                    let id = b.id;
                    self.close_quietly(idx as u32, e.into());
                    return Some(Activity::Closed(id));
                }
            }
        }
        self.closed.pop_front().map(Activity::Closed)
    }

    /// Sends a reply (pull style) other than through a request's [`Reply`] (a result computed
    /// later, elsewhere). A binding that cannot take it is closed and reported by the next
    /// [`serve_next`](Self::serve_next).
    pub fn send_reply(&mut self, to: BindingId, parts: &[&[u8]]) -> Result<(), ShmError> {
        let mut q = Recorder(std::mem::take(&mut self.closed));
        let r = self.reply(&mut q, to, parts);
        self.closed = q.0;
        r
    }

    /// Sleeps until a client calls, connects or hangs up, a watched descriptor is readable, or
    /// `timeout` passes. Every binding is armed first (check, arm, re-check), so a call racing
    /// with this makes it return at once instead of sleeping through it.
    pub fn block(&mut self, timeout: Option<Duration>) -> Result<(), ShmError> {
        self.active.append(&mut self.cool);
        while let Some(&idx) = self.active.last() {
            if let Some(b) = self.slots[idx as usize].as_mut() {
                b.sleeping_flag().store(1, Ordering::SeqCst);
                if b.calls.has_data() {
                    b.sleeping_flag().store(0, Ordering::SeqCst);
                    return Ok(());
                }
                b.armed = true;
            }
            self.active.pop();
        }
        if !self.closed.is_empty() {
            return Ok(());
        }
        let mut q = Recorder(std::mem::take(&mut self.closed));
        let r = self.process_events(&mut q, timeout);
        self.closed = q.0;
        self.now = Instant::now();
        self.last_event_check = self.now;
        r
    }

    fn close_quietly(&mut self, index: u32, why: ShmError) {
        let mut q = Recorder(std::mem::take(&mut self.closed));
        self.close(index, why, &mut q);
        self.closed = q.0;
    }

    fn binding_mut(&mut self, id: BindingId) -> Option<&mut Binding> {
        match self.slots.get_mut(id.index as usize) {
            Some(Some(b)) if b.id == id => Some(b),
            _ => None,
        }
    }

    fn serve_active(&mut self, handler: &mut impl ShmHandler) -> usize {
        let mut served = 0;
        let mut i = 0;
        while i < self.active.len() {
            let idx = self.active[i] as usize;
            let Some(b) = self.slots[idx].as_mut() else {
                self.active.swap_remove(i);
                continue;
            };
            match serve_one(b, handler, &self.config) {
                Ok(false) => i += 1,
                Ok(true) => {
                    served += 1;
                    self.spinner.observe(b.called(self.now));
                    i += 1;
                }
                Err(e) => self.close(idx as u32, e, handler),
            }
        }
        served
    }

    /// Arms the bindings idle past the spin budget (check, arm, re-check: a call that lands
    /// while arming keeps the binding active).
    fn arm_idle(&mut self) {
        self.rescan_cool();
        let Some(budget) = self.spinner.budget() else {
            self.cool_idle();
            return;
        };
        let mut i = 0;
        while i < self.active.len() {
            let idx = self.active[i] as usize;
            let Some(b) = self.slots[idx].as_mut() else {
                self.active.swap_remove(i);
                continue;
            };
            b.settle(self.now);
            if self.now.saturating_duration_since(b.last_active) < budget {
                i += 1;
                continue;
            }
            b.sleeping_flag().store(1, Ordering::SeqCst);
            if b.calls.has_data() {
                b.sleeping_flag().store(0, Ordering::SeqCst);
                i += 1;
            } else {
                b.armed = true;
                self.active.swap_remove(i);
            }
        }
    }

    /// Busy-polling: moves bindings idle past `COOL_AFTER` to the cool list.
    fn cool_idle(&mut self) {
        let mut i = 0;
        while i < self.active.len() {
            let idx = self.active[i];
            if let Some(b) = self.slots[idx as usize].as_mut() {
                b.settle(self.now);
            }
            match self.slots[idx as usize].as_ref() {
                Some(b) if self.now.saturating_duration_since(b.last_active) < COOL_AFTER => i += 1,
                Some(_) => {
                    self.cool.push(idx);
                    self.active.swap_remove(i);
                }
                None => {
                    self.active.swap_remove(i);
                }
            }
        }
    }

    /// Returns cool bindings with a call waiting to the active list.
    fn rescan_cool(&mut self) {
        let mut i = 0;
        while i < self.cool.len() {
            let idx = self.cool[i];
            match self.slots[idx as usize].as_mut() {
                Some(b) if !b.calls.has_data() => i += 1,
                Some(b) => {
                    b.last_active = self.now;
                    self.active.push(idx);
                    self.cool.swap_remove(i);
                }
                None => {
                    self.cool.swap_remove(i);
                }
            }
        }
    }

    fn process_events(&mut self, handler: &mut impl ShmHandler, timeout: Option<Duration>) -> Result<(), ShmError> {
        let n = self.epoll.wait(&mut self.events, timeout).map_err(io_err("epoll wait"))?.len();
        for k in 0..n {
            let data = self.events[k].u64;
            let kind = data & 3;
            let id = BindingId { index: (data as u32) >> 2, generation: (data >> 32) as u32 };
            match kind {
                TAG_LISTENER => self.accept_all(handler),
                // Someone else's descriptor (see `watch`): its owner reads it.
                TAG_WATCHED => {}
                TAG_DOORBELL => {
                    let now = self.now;
                    let Some(b) = self.binding_mut(id) else {
                        continue;
                    };
                    b.doorbell.drain();
                    if b.armed {
                        b.sleeping_flag().store(0, Ordering::SeqCst);
                        b.armed = false;
                        let idle = now.saturating_duration_since(b.last_active);
                        b.last_active = now;
                        self.spinner.observe(idle);
                        self.active.push(id.index);
                    }
                }
                _ => {
                    let Some(b) = self.binding_mut(id) else {
                        continue;
                    };
                    let mut byte = [0u8; 1];
                    let why = match (&b.sock).read(&mut byte) {
                        Ok(0) => ShmError::PeerGone,
                        Ok(_) => ShmError::Broken("client wrote on the liveness socket".into()),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) => ShmError::Io { op: "liveness socket", source: e },
                    };
                    self.close(id.index, why, handler);
                }
            }
        }
        Ok(())
    }

    fn accept_all(&mut self, handler: &mut impl ShmHandler) {
        loop {
            match self.listener.accept() {
                Ok((sock, _)) => self.admit(sock, handler),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: all taken. Anything else (EMFILE...) is retried on the next event.
                Err(_) => return,
            }
        }
    }

    fn admit(&mut self, sock: UnixStream, handler: &mut impl ShmHandler) {
        let Ok((uid, gid, pid)) = sys::peer_cred(sock.as_raw_fd()) else {
            return;
        };
        let peer = PeerCred { uid, gid, pid };
        let mut hello = Hello { status: Status::Accepted, uid, gid, layout: self.config.layout };
        if !self.config.policy.allows(uid, gid) {
            hello.status = Status::Refused;
            let _ = sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &[]);
            handler.refused(peer);
            return;
        }
        if self.binding_count() >= self.config.max_bindings {
            hello.status = Status::Busy;
            let _ = sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &[]);
            return;
        }
        // A client that cannot be set up (no memory, no descriptors) just gets a hang-up.
        let Ok((seg, memfd)) = Segment::create(self.config.layout) else {
            return;
        };
        let Ok(doorbell) = sys::EventFd::new() else { return };
        // Rung for a client that waits for its result in an event loop (an async call).
        let Ok(result_bell) = sys::EventFd::new() else { return };
        let fds = [memfd.as_raw_fd(), doorbell.as_raw_fd(), result_bell.as_raw_fd()];
        if sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &fds).is_err() || sock.set_nonblocking(true).is_err() {
            return;
        }
        drop(memfd);
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.generations.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let id = BindingId { index, generation: self.generations[index as usize] };
        let ok = self.epoll.add(doorbell.as_raw_fd(), libc::EPOLLIN as u32, tag(TAG_DOORBELL, id));
        let ok = ok.and_then(|_| {
            self.epoll.add(sock.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, tag(TAG_SOCKET, id))
        });
        if ok.is_err() {
            self.epoll.delete(doorbell.as_raw_fd());
            self.free.push(index);
            return;
        }
        let calls = Consumer::new(seg.call(), self.config.max_message);
        let results = Producer::new(seg.result(), Wake::FutexOrDoorbell(result_bell.as_raw_fd()));
        self.slots[index as usize] = Some(Binding {
            id,
            calls,
            results,
            armed: false,
            last_active: Instant::now(),
            called_since_check: false,
            peer,
            sock,
            doorbell,
            _result_bell: result_bell,
            _seg: seg,
        });
        self.active.push(index);
        // Room, now, for every binding to move between the active and cool lists, so that
        // serving (which moves them) never allocates.
        let bindings = self.active.len() + self.cool.len();
        self.cool.reserve(bindings.saturating_sub(self.cool.len()));
        self.active.reserve(bindings.saturating_sub(self.active.len()));
        handler.opened(id, peer);
    }

    fn close(&mut self, index: u32, why: ShmError, handler: &mut impl ShmHandler) {
        let Some(b) = self.slots[index as usize].take() else {
            return;
        };
        if matches!(why, ShmError::Ring(crate::RingError::Corrupt { .. })) {
            self.corrupt += 1;
        }
        if let Some(pos) = self.active.iter().position(|&i| i == index) {
            self.active.swap_remove(pos);
        }
        if let Some(pos) = self.cool.iter().position(|&i| i == index) {
            self.cool.swap_remove(pos);
        }
        // The client holds the same eventfd file: epoll would keep reporting it after our
        // close, so it must be removed explicitly.
        self.epoll.delete(b.doorbell.as_raw_fd());
        self.epoll.delete(b.sock.as_raw_fd());
        let slot = index as usize;
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        self.free.push(index);
        handler.closed(b.id, &why);
        // Dropping `b` unmaps the segment and closes the socket and doorbell.
        drop(b);
    }

    /// Bindings closed so far because their client broke the rings (a hostile or crashed peer).
    pub fn corrupt_bindings(&self) -> u64 {
        self.corrupt
    }

    /// The credentials of a live binding's client.
    pub fn peer(&self, binding: BindingId) -> Option<PeerCred> {
        match self.slots.get(binding.index as usize) {
            Some(Some(b)) if b.id == binding => Some(b.peer),
            _ => None,
        }
    }
}

fn serve_one(b: &mut Binding, handler: &mut impl ShmHandler, cfg: &ShmServerConfig) -> Result<bool, ShmError> {
    if !b.calls.poll()? {
        return Ok(false);
    }
    match serve_held(b, cfg, |id, request, reply| handler.call(id, request, reply)) {
        (_, Some(e)) => Err(e),
        (_, None) => Ok(true),
    }
}

/// Hands the request held in `b`'s call ring to `f` with a [`Reply`] into its result ring, then
/// frees it. Also returns why the binding must close, if the reply failed.
fn serve_held<R>(
    b: &mut Binding,
    cfg: &ShmServerConfig,
    f: impl FnOnce(BindingId, &[u8], Reply<'_>) -> R,
) -> (R, Option<ShmError>) {
    let mut failed = None;
    let reply = Reply { results: &mut b.results, cfg, sock: b.sock.as_raw_fd(), failed: &mut failed };
    let r = f(b.id, b.calls.message(), reply);
    b.calls.release();
    (r, failed)
}

impl Drop for ShmServer {
    fn drop(&mut self) {
        remove_if_ours(&self.path, self.file_id);
    }
}

/// Removes the socket file at `path` if it is still the one [`listen`] created (`file_id`), not
/// one a later server put there.
pub(crate) fn remove_if_ours(path: &Path, file_id: (u64, u64)) {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if (md.dev(), md.ino()) == file_id {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Creates the listening socket at `path` with `mode`, atomically: bound in a private directory,
/// given its mode there, then renamed into place without replacing anything that appeared
/// meanwhile. A stale socket (connect refused: its server is gone) is removed first.
pub(crate) fn listen(path: &Path, mode: u32) -> Result<(UnixListener, (u64, u64)), ShmError> {
    let in_use = |why| ShmError::PathInUse { path: path.to_path_buf(), why };
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_socket() => match UnixStream::connect(path) {
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                std::fs::remove_file(path).map_err(io_err("remove stale socket"))?;
            }
            Ok(_) => return Err(in_use("a server is listening there")),
            Err(_) => return Err(in_use("a socket that is not provably stale")),
        },
        Ok(_) => return Err(in_use("not a socket")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(ShmError::Io { op: "listen", source: e }),
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = parent.join(format!(".llshm-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(io_err("listen (temp dir)"))?;
    let result = (|| {
        let tmp = dir.join("s");
        let listener = UnixListener::bind(&tmp).map_err(io_err("bind"))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(io_err("chmod socket"))?;
        // Into place without replacing whatever may have appeared at `path` since the check above.
        if let Err(e) = sys::fs::rename_noreplace(&tmp, path) {
            if e.kind() == io::ErrorKind::AlreadyExists {
                return Err(in_use("something appeared there while binding"));
            }
            return Err(ShmError::Io { op: "rename socket into place", source: e });
        }
        let md = std::fs::symlink_metadata(path).map_err(io_err("listen"))?;
        Ok((listener, (md.dev(), md.ino())))
    })();
    let _ = std::fs::remove_file(dir.join("s"));
    let _ = std::fs::remove_dir(&dir);
    result
}
