//! The poller of connections: one thread spins over the call rings of the active connections, arms
//! the idle ones and sleeps in epoll when all are armed (see the module above for the policy).

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lowlat_wait::spin_until;

use super::group::TAG_INBOX;
use super::reply::send_reply;
use super::{
    Activity, Connection, ConnectionId, Recorder, Reply, ShmHandler, ShmServer, ShmServerConfig, COOL_AFTER,
    EVENT_CHECK, KEEP_ACTIVE, TAG_DOORBELL, TAG_LISTENER, TAG_WATCHED,
};
use crate::error::{io_err, ShmError};
use crate::ring::RingError;

impl ShmServer {
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
    /// per-connection failures close that connection and are reported to `ShmHandler::closed`.
    pub fn poll(&mut self, handler: &mut impl ShmHandler, timeout: Option<Duration>) -> Result<usize, ShmError> {
        self.now = Instant::now();
        let deadline = timeout.map(|t| self.now + t);
        let mut passes = 0u32;
        // With no spin budget, connections are armed as soon as they are found empty: every call
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
                    if let Some(left) = self.park_backlogged(left) {
                        self.process_events(handler, left)?;
                    }
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

    /// Sends a deferred reply on `connection` (for a request whose `Reply` was dropped). A failure
    /// closes the connection.
    pub fn reply(
        &mut self,
        handler: &mut impl ShmHandler,
        connection: ConnectionId,
        parts: &[&[u8]],
    ) -> Result<(), ShmError> {
        let ShmServer { slots, config, backlogged, kept, .. } = &mut *self;
        let b = match slots.get_mut(connection.index as usize) {
            Some(Some(b)) if b.id == connection => b,
            _ => return Err(ShmError::PeerGone),
        };
        let had_unsent = !b.unsent.is_empty();
        let sent = send_reply(&mut b.results, &mut b.unsent, kept, config, b.sock.as_raw_fd(), parts);
        if !had_unsent && !b.unsent.is_empty() {
            backlogged.push(connection.index);
        }
        match sent {
            Err(e @ ShmError::Ring(RingError::TooLarge { .. })) => Err(e),
            Err(e) => {
                let msg = e.to_string();
                self.close(connection.index, e, handler);
                Err(ShmError::Broken(msg))
            }
            Ok(()) => Ok(()),
        }
    }

    /// Closes a connection from the server side.
    pub fn disconnect(&mut self, handler: &mut impl ShmHandler, connection: ConnectionId) {
        if self.connection_mut(connection).is_some() {
            self.close(connection.index, ShmError::Broken("closed by the server".into()), handler);
        }
    }

    /// Adds a descriptor whose readability ends [`block`](Self::block) (for example the
    /// caller's own eventfd for completions from worker threads). It is never read here.
    pub fn watch(&mut self, fd: std::os::fd::RawFd) -> Result<(), ShmError> {
        self.epoll.add(fd, libc::EPOLLIN as u32, TAG_WATCHED).map_err(io_err("epoll watch"))
    }

    /// Pull-style serving, for a caller that runs its own spin-then-block loop (the runtime):
    /// finds the next request of any connection without blocking and serves it at once: `f` reads
    /// it where it lies in the call ring and may answer through the [`Reply`], which writes into
    /// the same connection's result ring; the request's ring space is freed afterwards. Connections
    /// are scanned round robin, so a busy client cannot starve the others. The scan's own
    /// bookkeeping (idleness, the adaptive budget) is done after the reply is out, off the
    /// round trip's path. A connection that could not take its reply is closed and reported by a
    /// later call. Sleep with [`block`](Self::block) when this finds nothing.
    #[inline]
    pub fn serve_next<R>(&mut self, f: impl FnOnce(ConnectionId, &[u8], Reply<'_>) -> R) -> Option<Activity<R>> {
        if !self.backlogged.is_empty() {
            let mut q = Recorder(std::mem::take(&mut self.closed));
            self.flush_backlogged(&mut q);
            self.closed = q.0;
        }
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
            let ShmServer { slots, config, spinner, now, backlogged, kept, grown, .. } = &mut *self;
            let Some(b) = slots[idx].as_mut() else {
                continue;
            };
            if !b.unsent.is_empty() {
                continue; // its calls wait until its replies are out
            }
            match b.calls.poll() {
                Ok(false) => {}
                Ok(true) => {
                    let id = b.id;
                    let (r, after) = serve_held(b, config, (kept, grown), f);
                    spinner.observe(b.called(*now));
                    if !b.unsent.is_empty() {
                        backlogged.push(idx as u32);
                    }
                    self.next = i + 1;
                    match after {
                        After::Served => {}
                        After::Failed(e) => self.close_quietly(idx as u32, e),
                        After::HandTo(to) => {
                            let mut q = Recorder(std::mem::take(&mut self.closed));
                            self.hand_over(idx as u32, to, &mut q);
                            self.closed = q.0;
                        }
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
    /// later, elsewhere). A connection that cannot take it is closed and reported by the next
    /// [`serve_next`](Self::serve_next).
    pub fn send_reply(&mut self, to: ConnectionId, parts: &[&[u8]]) -> Result<(), ShmError> {
        let mut q = Recorder(std::mem::take(&mut self.closed));
        let r = self.reply(&mut q, to, parts);
        self.closed = q.0;
        r
    }

    /// Sleeps until a client calls, connects or hangs up, a watched descriptor is readable, or
    /// `timeout` passes. Every connection is armed first (check, arm, re-check), so a call racing
    /// with this makes it return at once instead of sleeping through it.
    pub fn block(&mut self, timeout: Option<Duration>) -> Result<(), ShmError> {
        self.active.append(&mut self.cool);
        // A message half streamed, either way: its client is writing or reading the rest now,
        // a copy away. Sleeping here cost a wake-up on each side for every chunk.
        if self.streaming() && spin_until(self.spinner.mid_message_budget(), || self.streamed_on()) {
            return Ok(());
        }
        while let Some(&idx) = self.active.last() {
            if let Some(b) = self.slots[idx as usize].as_mut() {
                b.sleeping_flag().store(1, Ordering::SeqCst);
                // Calls waiting behind replies unsent are not served yet: no reason to stay up.
                if b.calls.has_data() && b.unsent.is_empty() {
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
        let Some(timeout) = self.park_backlogged(timeout) else {
            return Ok(());
        };
        let mut q = Recorder(std::mem::take(&mut self.closed));
        let r = self.process_events(&mut q, timeout);
        self.closed = q.0;
        self.now = Instant::now();
        self.last_event_check = self.now;
        r
    }

    /// Whether a request is half read or a reply half written (`block` has put every polled
    /// connection in `active`).
    fn streaming(&self) -> bool {
        !self.backlogged.is_empty()
            || self.active.iter().any(|&i| self.slots[i as usize].as_ref().is_some_and(|b| b.calls.assembling()))
    }

    /// Whether a stream moved on: more of a request came, or a client freed room for a reply
    /// waiting to be written.
    fn streamed_on(&mut self) -> bool {
        let ShmServer { slots, active, backlogged, .. } = self;
        let more = |i: &u32| {
            slots[*i as usize]
                .as_ref()
                .is_some_and(|b| b.calls.assembling() && b.unsent.is_empty() && b.calls.has_data())
        };
        if active.iter().any(more) {
            return true;
        }
        backlogged.iter().any(|&i| slots[i as usize].as_mut().is_some_and(|b| b.unsent.has_room(&mut b.results)))
    }

    fn close_quietly(&mut self, index: u32, why: ShmError) {
        let mut q = Recorder(std::mem::take(&mut self.closed));
        self.close(index, why, &mut q);
        self.closed = q.0;
    }

    fn connection_mut(&mut self, id: ConnectionId) -> Option<&mut Connection> {
        match self.slots.get_mut(id.index as usize) {
            Some(Some(b)) if b.id == id => Some(b),
            _ => None,
        }
    }

    /// Writes what the result rings of backlogged connections have room for; a connection whose
    /// replies are all out is served again (polled: its calls may have waited), one whose client
    /// freed no room for the stall limit is closed.
    fn flush_backlogged(&mut self, handler: &mut impl ShmHandler) {
        let mut i = 0;
        while i < self.backlogged.len() {
            let idx = self.backlogged[i];
            let Some(b) = self.slots[idx as usize].as_mut() else {
                self.backlogged.swap_remove(i);
                continue;
            };
            match b.unsent.flush(&mut b.results, &mut self.kept, self.config.stall_limit) {
                Ok(Some(_)) => i += 1,
                Ok(None) => {
                    self.backlogged.swap_remove(i);
                    if b.disarm(self.now).is_some() {
                        self.active.push(idx);
                    }
                }
                // Taken out of `backlogged` as it closes (`detach`).
                Err(e) => self.close(idx, e, handler),
            }
        }
    }

    /// Before a sleep of at most `timeout`: asks the client of each backlogged connection to
    /// ring its doorbell when it frees room. Returns the sleep, cut short where a stall limit
    /// falls, or `None` (no sleep) if a ring has room already.
    fn park_backlogged(&mut self, mut timeout: Option<Duration>) -> Option<Option<Duration>> {
        if self.backlogged.is_empty() {
            return Some(timeout);
        }
        let now = Instant::now();
        let ShmServer { slots, backlogged, config, .. } = self;
        for &idx in backlogged.iter() {
            let Some(b) = slots[idx as usize].as_mut() else { continue };
            let left = b.unsent.park(&mut b.results, config.stall_limit)?.saturating_duration_since(now);
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        Some(timeout)
    }

    fn serve_active(&mut self, handler: &mut impl ShmHandler) -> usize {
        if !self.backlogged.is_empty() {
            self.flush_backlogged(handler);
        }
        let mut served = 0;
        let mut i = 0;
        while i < self.active.len() {
            let idx = self.active[i] as usize;
            let Some(b) = self.slots[idx].as_mut() else {
                self.active.swap_remove(i);
                continue;
            };
            if !b.unsent.is_empty() {
                i += 1; // its calls wait until its replies are out
                continue;
            }
            match serve_one(b, handler, &self.config, (&mut self.kept, &mut self.grown)) {
                Ok(false) => i += 1,
                Ok(true) => {
                    served += 1;
                    self.spinner.observe(b.called(self.now));
                    if !b.unsent.is_empty() {
                        self.backlogged.push(idx as u32);
                    }
                    i += 1;
                }
                Err(e) => self.close(idx as u32, e, handler),
            }
        }
        served
    }

    /// Arms the connections idle past the spin budget (check, arm, re-check: a call that lands
    /// while arming keeps the connection active).
    fn arm_idle(&mut self) {
        self.rescan_cool();
        let Some(budget) = self.spinner.budget() else {
            self.cool_idle();
            return;
        };
        // While the server spins it looks at every active connection anyway, so a connection
        // quiet for the spin budget stays active until it has been quiet for `COOL_AFTER`:
        // armed, its client's next call would write its doorbell (a system call, ~1 µs) and the
        // server would find it through epoll. With 64 async calls in flight from one client over
        // 64 connections, each quiet for ~60 µs between calls, a tenth of the calls rang (a fifth
        // of the client's time, in `eventfd_write`). Up to `KEEP_ACTIVE` connections: every quiet
        // one kept costs each pass a look. A server with nothing to do for its spin budget arms
        // every connection before it sleeps (`block`); with no budget (blocking), a connection
        // is armed as soon as it is found empty.
        let idle_after =
            if budget.is_zero() || self.active.len() > KEEP_ACTIVE { budget } else { budget.max(COOL_AFTER) };
        let mut i = 0;
        while i < self.active.len() {
            let idx = self.active[i] as usize;
            let Some(b) = self.slots[idx].as_mut() else {
                self.active.swap_remove(i);
                continue;
            };
            b.settle(self.now);
            if self.now.saturating_duration_since(b.last_active) < idle_after {
                i += 1;
                continue;
            }
            b.sleeping_flag().store(1, Ordering::SeqCst);
            if b.calls.has_data() && b.unsent.is_empty() {
                b.sleeping_flag().store(0, Ordering::SeqCst);
                i += 1;
            } else {
                b.armed = true;
                self.active.swap_remove(i);
            }
        }
    }

    /// Busy-polling: moves connections idle past `COOL_AFTER` to the cool list.
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

    /// Returns cool connections with a call waiting to the active list.
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
            // The tag holds the whole id (`tag`).
            let id = ConnectionId { index: (data as u32) >> 2, generation: (data >> 32) as u32 };
            match kind {
                TAG_LISTENER if data == TAG_INBOX => self.take_inbox(handler),
                TAG_LISTENER => self.accept_all(handler),
                // Someone else's descriptor (see `watch`): its owner reads it.
                TAG_WATCHED => {}
                TAG_DOORBELL => {
                    let now = self.now;
                    let Some(b) = self.connection_mut(id) else {
                        continue;
                    };
                    b.doorbell.drain();
                    if let Some(idle) = b.disarm(now) {
                        self.spinner.observe(idle);
                        self.active.push(id.index);
                    }
                }
                _ => {
                    let Some(b) = self.connection_mut(id) else {
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

    fn close(&mut self, index: u32, why: ShmError, handler: &mut impl ShmHandler) {
        let Some(b) = self.detach(index) else {
            return;
        };
        if matches!(why, ShmError::Ring(crate::RingError::Corrupt { .. })) {
            self.corrupt += 1;
        }
        self.group.closed();
        handler.closed(b.id, &why);
        // Dropping `b` unmaps the segment and closes the socket and doorbell.
        drop(b);
    }
}

fn serve_one(
    b: &mut Connection,
    handler: &mut impl ShmHandler,
    cfg: &ShmServerConfig,
    held: (&mut usize, &mut usize),
) -> Result<bool, ShmError> {
    if !b.calls.poll()? {
        return Ok(false);
    }
    match serve_held(b, cfg, held, |id, request, reply| handler.call(id, request, reply)) {
        (_, After::Failed(e)) => Err(e),
        // Handing over is for the pull style (`serve_next`): here the request is just dropped.
        (_, After::Served | After::HandTo(_)) => Ok(true),
    }
}

/// What is done with a connection once its request was served.
enum After {
    Served,
    /// Its reply failed: it must close.
    Failed(ShmError),
    /// Its request was left unread: the connection goes to this member of the group.
    HandTo(usize),
}

/// Hands the request held in `b`'s call ring to `f` with a [`Reply`] into its result ring, then
/// frees it (unless `f` handed the connection over). `(kept, grown)`: the server's bytes of
/// replies kept and of reassembly buffers, counted here.
#[inline]
fn serve_held<R>(
    b: &mut Connection,
    cfg: &ShmServerConfig,
    (kept, grown): (&mut usize, &mut usize),
    f: impl FnOnce(ConnectionId, &[u8], Reply<'_>) -> R,
) -> (R, After) {
    let mut failed = None;
    let mut hand_to = None;
    let sock = b.sock.as_raw_fd();
    let reply = Reply {
        results: &mut b.results,
        unsent: &mut b.unsent,
        kept,
        cfg,
        sock,
        failed: &mut failed,
        hand_to: &mut hand_to,
    };
    let r = f(b.id, b.calls.message(), reply);
    if let Some(to) = hand_to {
        return (r, After::HandTo(to));
    }
    b.calls.release();
    if b.calls.held() != b.grown {
        // Grown for a streamed request: kept for the next one while the server's connections
        // together are within their limit, else given back.
        let mut held = b.calls.held();
        if *grown - b.grown + held > cfg.max_grown {
            b.calls.trim();
            held = b.calls.held();
        }
        *grown = *grown - b.grown + held;
        b.grown = held;
    }
    (r, failed.map_or(After::Served, After::Failed))
}
