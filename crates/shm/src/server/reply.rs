//! Replies written straight into a connection's result ring; what the ring has no room for yet
//! is kept with the connection (`Unsent`) and written as the client frees room, so that a
//! client slow to read holds up no other connection.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use lowlat_wait::Spinner;

use super::ShmServerConfig;
use crate::error::ShmError;
use crate::ring::{record_len, Producer, RingError};

/// Writes one reply straight into a connection's result ring.
pub struct Reply<'a> {
    pub(super) results: &'a mut Producer,
    pub(super) unsent: &'a mut Unsent,
    /// Bytes kept by the serving thread across its connections.
    pub(super) kept: &'a mut usize,
    pub(super) cfg: &'a ShmServerConfig,
    /// The connection's liveness socket (a reply waiting in place looks whether the client is
    /// gone).
    pub(super) sock: i32,
    pub(super) failed: &'a mut Option<ShmError>,
    /// Set by [`hand_over`](Self::hand_over).
    pub(super) hand_to: &'a mut Option<usize>,
}

impl Reply<'_> {
    /// The largest reply [`send_with`](Self::send_with) builds in place.
    pub fn max_inline(&self) -> usize {
        self.results.max_record()
    }

    /// Sends the reply gathered from `parts` (streamed if larger than the ring). What the ring
    /// has no room for now is kept and sent as the client reads (unless the serving thread
    /// keeps [`max_kept`](ShmServerConfig::max_kept) bytes already: then it waits for room). A
    /// client that frees no room for the stall limit is disconnected.
    pub fn send(mut self, parts: &[&[u8]]) -> Result<(), ShmError> {
        let r = send_reply(self.results, self.unsent, self.kept, self.cfg, self.sock, parts);
        self.note(r)
    }

    /// Sends a reply of `len` bytes that `fill` writes where it will be read. A reply larger
    /// than [`max_inline`](Self::max_inline), or one the ring has no room for now, is built in
    /// a buffer and sent as [`send`](Self::send) sends.
    pub fn send_with(mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), ShmError> {
        if len > self.cfg.max_message {
            return Err(RingError::TooLarge { len, max: self.cfg.max_message }.into());
        }
        let r = (|| {
            if len <= self.results.max_record() && self.unsent.is_empty() && self.results.has_room(record_len(len))? {
                if self.results.try_write_whole(len, fill)? {
                    return Ok(());
                }
                return Err(RingError::Corrupt { what: "consumer index lost room already seen" }.into());
            }
            let mut v = vec![0u8; len];
            fill(&mut v);
            send_reply(self.results, self.unsent, self.kept, self.cfg, self.sock, &[&v])
        })();
        self.note(r)
    }

    /// Lends the result ring's free space to build a reply of yet unknown length where the
    /// client will read it: `build` returns how many bytes it wrote, sent then, or `None` to
    /// send nothing this way (the `Reply` can still send). Never waits: a reply that does not
    /// fit the space lent is the builder's to send otherwise.
    #[inline]
    pub fn build_in_place(
        &mut self,
        build: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, ShmError> {
        // A connection with replies unsent is not served (`ShmServer::serve_next`), so the
        // space lent never jumps ahead of them.
        debug_assert!(self.unsent.is_empty());
        match self.results.write_in_place(self.cfg.max_message, build) {
            Ok(n) => Ok(n),
            Err(e) => self.note(Err(e.into())).map(|()| None),
        }
    }

    /// Leaves the request unread and hands its connection to member `to` of this server's
    /// group ([`ShmServer::bind_group`](super::ShmServer::bind_group)), which serves the request
    /// and the rest of the connection's; here the connection is reported closed. Sends nothing.
    /// Only through [`ShmServer::serve_next`](super::ShmServer::serve_next) (a push-style
    /// handler's request is dropped instead); a member not in the group, or this one, is
    /// ignored and the request consumed as if answered with nothing.
    pub fn hand_over(self, to: usize) {
        *self.hand_to = Some(to);
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

/// Replies a connection's result ring had no room for, oldest first, the first of them
/// perhaps partly written. While any is here the connection's calls wait in its call ring
/// (`ShmServer::serve_next`): a client that does not read cannot make the server hold more.
#[derive(Default)]
pub(super) struct Unsent {
    replies: VecDeque<Vec<u8>>,
    /// Their bytes (counted in the serving thread's total while here).
    bytes: usize,
    /// Bytes of the first already in the ring.
    sent: usize,
    /// Since when the client has freed no room in the ring (the stall limit counts from here),
    /// and where its index stood at the last look.
    since: Option<Instant>,
    tail_at: Option<u32>,
    /// The size of the record that waits for room (as the last `flush` found).
    waits_for: usize,
    /// The buffer of the reply sent last, kept for the next (`flush` says which).
    spare: Vec<u8>,
}

impl Unsent {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Bytes held, to be taken off the serving thread's total when the connection goes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keeps `parts` (of which `sent` bytes are in the ring already, the next record of them
    /// `need` bytes) behind the others.
    fn keep(&mut self, parts: &[&[u8]], sent: usize, need: usize, kept: &mut usize) {
        let mut buf = std::mem::take(&mut self.spare);
        buf.clear();
        for p in parts {
            buf.extend_from_slice(p);
        }
        self.bytes += buf.len();
        *kept += buf.len();
        if self.replies.is_empty() {
            self.sent = sent;
            self.since = Some(Instant::now());
            self.waits_for = need;
        }
        self.replies.push_back(buf);
    }

    /// Writes what the ring has room for now. Returns the size of the record that waits for
    /// room, or `None` once all is written; fails once the client has freed no room for
    /// `limit`. Reads the clock (the server's own lags, by a whole procedure's run at times).
    pub fn flush(
        &mut self,
        results: &mut Producer,
        kept: &mut usize,
        limit: Duration,
    ) -> Result<Option<usize>, ShmError> {
        // Awake now: the client need ring no more (`ShmServer::block` parks it again).
        results.unpark();
        // The client read since the last look (perhaps all there was, the server busy with
        // other calls meanwhile): not a stall.
        let tail = results.refresh()?;
        let mut moved = self.tail_at.is_some_and(|t| t != tail);
        while let Some(first) = self.replies.front() {
            let before = self.sent;
            let waits = results.send_some(&[first], first.len(), &mut self.sent)?;
            moved |= self.sent != before;
            if let Some(need) = waits {
                self.tail_at = Some(tail);
                self.waits_for = need;
                let now = Instant::now();
                if moved {
                    self.since = Some(now);
                } else if self.since.is_some_and(|t| now.saturating_duration_since(t) >= limit) {
                    return Err(ShmError::Stalled { waited_ms: limit.as_millis() as u64 });
                }
                return Ok(Some(need));
            }
            moved = true;
            self.sent = 0;
            let done = self.replies.pop_front().unwrap_or_default();
            self.bytes -= done.len();
            *kept -= done.len();
            // Its buffer serves the next reply kept if no larger than the connection's rings
            // (the usual large result, written again and again, allocates nothing); a larger one
            // goes, so that a connection holds no more between replies than its segment.
            if done.capacity() <= 2 * results.ring().size() {
                self.spare = done;
            }
        }
        self.since = None;
        self.tail_at = None;
        Ok(None)
    }

    /// Whether the result ring has room for the first reply waiting (or failed: `flush` will
    /// say).
    pub fn has_room(&self, results: &mut Producer) -> bool {
        results.has_room(self.waits_for).unwrap_or(true)
    }

    /// Asks the client to ring the connection's doorbell when it frees room for the first,
    /// before the server sleeps; returns when the stall limit falls for them, or `None` if the
    /// ring has room now (or failed: `flush` will say), when there is no sleeping.
    pub fn park(&mut self, results: &mut Producer, limit: Duration) -> Option<Instant> {
        match results.park(self.waits_for) {
            Ok(false) => Some(self.since.unwrap_or_else(Instant::now) + limit),
            Ok(true) | Err(_) => None,
        }
    }
}

/// Sends the reply gathered from `parts` through `results`, keeping in `unsent` what does not
/// fit now (all of it if replies are unsent already, to keep their order; bounded by the
/// calls the connection had taken, as its calls wait meanwhile), or, with `kept` at the
/// budget, waiting for room here.
pub(super) fn send_reply(
    results: &mut Producer,
    unsent: &mut Unsent,
    kept: &mut usize,
    cfg: &ShmServerConfig,
    sock: i32,
    parts: &[&[u8]],
) -> Result<(), ShmError> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    if total > cfg.max_message {
        return Err(RingError::TooLarge { len: total, max: cfg.max_message }.into());
    }
    if !unsent.is_empty() {
        unsent.keep(parts, 0, 0, kept);
        return Ok(());
    }
    let mut sent = 0;
    let mut waited = 0;
    while let Some(need) = results.send_some(parts, total, &mut sent)? {
        // A client reading as fast as we write frees the next chunk within microseconds: worth
        // a short wait, not a copy of the rest. The other connections wait no longer than this
        // for a client that is slower.
        if waited == BRIEF_WAIT {
            if *kept + total <= cfg.max_kept {
                unsent.keep(parts, sent, need, kept);
                return Ok(());
            }
            return wait_in_place(results, cfg, sock, parts, total, sent, need);
        }
        waited += 1;
        std::hint::spin_loop();
    }
    Ok(())
}

/// Writes the rest of a reply as the client frees room, waiting for it here (spinning, then
/// sleeping until the client frees room), for at most the stall limit in all.
fn wait_in_place(
    results: &mut Producer,
    cfg: &ShmServerConfig,
    sock: i32,
    parts: &[&[u8]],
    total: usize,
    mut sent: usize,
    mut need: usize,
) -> Result<(), ShmError> {
    let deadline = Instant::now() + cfg.stall_limit;
    let mut spinner = Spinner::new(cfg.spin);
    loop {
        crate::channel::wait_space(results, need, &mut spinner, deadline, sock).map_err(|e| match e {
            ShmError::Timeout { .. } => ShmError::Stalled { waited_ms: cfg.stall_limit.as_millis() as u64 },
            e => e,
        })?;
        match results.send_some(parts, total, &mut sent)? {
            None => return Ok(()),
            Some(n) => need = n,
        }
    }
}

/// Looks for room, at most this many times in all (some microseconds), before a reply is kept.
const BRIEF_WAIT: u32 = 256;
