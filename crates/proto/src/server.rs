//! The server side: sessions, at-most-once execution, reassembly of calls and sending of results.
//!
//! The server keeps, per session and slot, the last call number and (until acknowledged) its
//! result. A duplicate of a finished call gets the saved result again, a duplicate of a running
//! call gets "still working", anything older is dropped: a procedure never runs twice for one
//! call. The server never retransmits on its own; the client's timers drive recovery, so the only
//! server timer is session expiry.
//!
//! Sessions are found by the index in their token, not by hashing (Firefly §4.2.5); the rest of
//! the token is random, so it cannot be guessed. State is bounded by `max_sessions` × slots ×
//! `max_message`, and sessions idle past `session_idle` are dropped.
//!
//! Use: feed frames with [`ServerEngine::handle`]; when it returns an [`IncomingCall`], run the
//! procedure (it reads `args` and appends its result to `reply`), then call
//! [`ServerEngine::finish`]. Over a reliable channel, offer each frame to
//! [`ServerEngine::take_whole_call`] first: it takes the common case, a call sent whole, without
//! decoding it. A procedure run elsewhere (a worker pool) copies the arguments,
//! and its result comes back through [`ServerEngine::finish_with`]. A call that fails is
//! finished with [`Status::Error`] and, in place of the result, the reason in UTF-8 (or
//! nothing): it goes to the client in the `Error` frame ([`ErrorMessage`], cut to fit one frame).

use core::time::Duration;
use std::time::Instant;

use crate::frag::{Burst, FragReceiver, FragSender};
use crate::wire::{
    flags, BindGrant, BindRefusal, BindRequest, ByteOrder, ErrorCode, ErrorMessage, Header, Kind, Refusal,
    BIND_RELIABLE, HEADER_LEN, PROTOCOL_VERSION,
};
use crate::MAX_WINDOW;

/// A program the server serves, with the range of versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramVersions {
    pub program: u32,
    pub low: u32,
    pub high: u32,
}

/// Limits and timers of a server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub programs: Vec<ProgramVersions>,
    /// Sessions at once (at most 65536: the index is 16 bits of the token).
    pub max_sessions: usize,
    pub max_slots: u16,
    pub max_message: u32,
    /// Largest frame this server's transport carries.
    pub max_frame: u32,
    pub window: u16,
    /// Sessions idle this long are dropped (by a sweep every quarter of it: within one and a half
    /// times this long).
    pub session_idle: Duration,
    /// Seed for session tokens and the server generation (give it real randomness).
    pub seed: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            programs: Vec::new(),
            max_sessions: 1024,
            max_slots: 64,
            max_message: 4 << 20,
            max_frame: 1472,
            window: 32,
            session_idle: Duration::from_secs(120),
            seed: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

/// Identifies a running call, to finish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub token: u64,
    pub slot: u16,
    pub call_no: u32,
}

impl CallKey {
    /// The index of the call's session among the server's sessions (below `max_sessions`,
    /// reused once the session is gone): for a caller that keeps something per session.
    pub fn session(&self) -> usize {
        session_of(self.token)
    }
}

/// The session index a token carries (bits 32..48; the rest is the generation and randomness).
fn session_of(token: u64) -> usize {
    ((token >> 32) & 0xFFFF) as usize
}

/// A call ready to run. `args` lies in the received frame (single-frame calls) or in the
/// slot's reassembly buffer; `reply` is the slot's result buffer, emptied.
#[derive(Debug)]
pub struct IncomingCall<'a> {
    pub key: CallKey,
    pub program: u32,
    pub version: u32,
    pub proc_no: u32,
    /// The byte order of the client (arguments arrive in the server's order; see `wire`).
    pub client_order: ByteOrder,
    pub args: &'a [u8],
    pub reply: &'a mut Vec<u8>,
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The result is in the reply buffer (or given to `finish_with`).
    Ok,
    /// The call failed; the reply buffer (or what is given to `finish_with`) holds the reason in
    /// UTF-8, or nothing.
    Error(ErrorCode),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Empty,
    Receiving,
    Running,
    Done(Status),
    Acked,
}

#[derive(Debug)]
struct Slot<A> {
    peer: Option<A>,
    call_no: u32,
    phase: Phase,
    rx: FragReceiver,
    result: Vec<u8>,
    tx: FragSender,
}

#[derive(Debug)]
struct Session<A> {
    token: u64,
    nonce: u64,
    bind_peer: A,
    program: u32,
    version: u32,
    client_order: ByteOrder,
    reliable: bool,
    frag_size: u32,
    window: u16,
    max_message: u32,
    /// A time at or after the session's last frame: its bind, or the sweep that found it
    /// `active`.
    last_active: Instant,
    /// A frame came since the last sweep. A flag rather than a time, so that serving a call
    /// reads no clock.
    active: bool,
    slots: Vec<Slot<A>>,
}

/// Counters a person can read to see what the engine dropped and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub calls: u64,
    pub duplicates: u64,
    pub malformed: u64,
    pub unknown_session: u64,
    pub expired_sessions: u64,
    pub refused_binds: u64,
}

/// The server's protocol state for one transport endpoint. `A` is the transport's peer address.
#[derive(Debug)]
pub struct ServerEngine<A> {
    cfg: ServerConfig,
    generation: u16,
    rng: u64,
    sessions: Vec<Option<Session<A>>>,
    live: usize,
    next_sweep: Option<Instant>,
    pub stats: ServerStats,
}

/// The callback a server engine sends frames through: (peer, header, body).
type SendTo<'a, A> = dyn FnMut(&A, &[u8; HEADER_LEN], &[u8]) + 'a;

/// Results larger than this are released when acknowledged, not kept for the next call.
const KEEP_CAPACITY: usize = 256 * 1024;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<A: Copy + Eq> ServerEngine<A> {
    pub fn new(mut cfg: ServerConfig) -> ServerEngine<A> {
        cfg.max_sessions = cfg.max_sessions.clamp(1, 1 << 16);
        cfg.window = cfg.window.clamp(2, MAX_WINDOW);
        cfg.max_slots = cfg.max_slots.max(1);
        let mut rng = cfg.seed;
        let generation = loop {
            let g = splitmix(&mut rng) as u16;
            if g != 0 {
                break g;
            }
        };
        ServerEngine {
            generation,
            rng,
            sessions: (0..cfg.max_sessions).map(|_| None).collect(),
            live: 0,
            next_sweep: None,
            cfg,
            stats: ServerStats::default(),
        }
    }

    /// The server generation: changes with every server start, so clients detect restarts.
    pub fn generation(&self) -> u16 {
        self.generation
    }

    /// Sessions alive now.
    pub fn session_count(&self) -> usize {
        self.live
    }

    /// Bytes held for results and reassembly across all sessions (to check state is bounded).
    pub fn buffered_bytes(&self) -> usize {
        self.sessions
            .iter()
            .flatten()
            .flat_map(|s| s.slots.iter())
            .map(|sl| sl.result.capacity() + sl.rx.message().len())
            .sum()
    }

    fn session_index(&self, token: u64) -> Option<usize> {
        let idx = session_of(token);
        match self.sessions.get(idx) {
            Some(Some(s)) if s.token == token => Some(idx),
            _ => None,
        }
    }

    /// Feeds one frame received from `from`. `now` is asked only by a bind: serving a call reads
    /// no clock (a read costs ~30 ns in a VM, a tenth of a shared-memory round trip).
    pub fn handle<'a>(
        &'a mut self,
        from: A,
        frame: &'a [u8],
        now: impl FnOnce() -> Instant,
        out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8]),
    ) -> Option<IncomingCall<'a>> {
        let Ok((h, body)) = Header::parse(frame) else {
            self.stats.malformed += 1;
            return None;
        };
        if h.kind == Kind::Bind {
            self.handle_bind(from, &h, body, now(), out);
            return None;
        }
        if h.version != PROTOCOL_VERSION {
            self.stats.malformed += 1;
            return None;
        }
        let Some(idx) = self.session_index(h.token) else {
            self.stats.unknown_session += 1;
            if matches!(h.kind, Kind::Call | Kind::Probe) {
                let mut e = h;
                e.kind = Kind::Error;
                e.flags = 0;
                e.proc_or_code = ErrorCode::UnknownSession.to_u32();
                e.total_len = 0;
                e.offset = self.generation as u32;
                out(&from, &e.to_bytes(), &[]);
            }
            return None;
        };
        let stats = &mut self.stats;
        let sess = self.sessions[idx].as_mut().expect("index checked above");
        let Some(slot) = sess.slots.get_mut(h.slot as usize) else {
            stats.malformed += 1;
            return None;
        };
        sess.active = true;
        slot.peer = Some(from);
        match h.kind {
            Kind::Call => {
                if h.call_no.wrapping_sub(slot.call_no) as i32 > 0 || slot.phase == Phase::Empty {
                    // A new call: it acknowledges the previous result.
                    if h.total_len > sess.max_message {
                        slot.call_no = h.call_no;
                        slot.result.clear();
                        slot.phase = Phase::Done(Status::Error(ErrorCode::TooLarge));
                        send_result(sess.token, sess.frag_size, sess.window, h.slot, slot, out);
                        return None;
                    }
                    slot.call_no = h.call_no;
                    stats.calls += 1;
                    if h.offset == 0 && body.len() == h.total_len as usize {
                        // The fast path: a single-frame call runs where it lies.
                        slot.phase = Phase::Running;
                        slot.result.clear();
                        return Some(IncomingCall {
                            key: CallKey { token: sess.token, slot: h.slot, call_no: h.call_no },
                            program: sess.program,
                            version: sess.version,
                            proc_no: h.proc_or_code,
                            client_order: sess.client_order,
                            args: body,
                            reply: &mut slot.result,
                        });
                    }
                    slot.rx.reset(h.total_len, sess.frag_size);
                    slot.phase = Phase::Receiving;
                } else if h.call_no != slot.call_no {
                    stats.duplicates += 1;
                    return None; // older than the current call: a stale duplicate
                }
                match slot.phase {
                    Phase::Receiving => {
                        if slot.rx.accept(h.total_len, h.offset, body).is_err() {
                            stats.malformed += 1;
                            return None;
                        }
                        if slot.rx.is_complete() {
                            slot.phase = Phase::Running;
                            slot.result.clear();
                            return Some(IncomingCall {
                                key: CallKey { token: sess.token, slot: h.slot, call_no: h.call_no },
                                program: sess.program,
                                version: sess.version,
                                proc_no: h.proc_or_code,
                                client_order: sess.client_order,
                                args: slot.rx.message(),
                                reply: &mut slot.result,
                            });
                        }
                        if h.flags & flags::REQ_ACK != 0 {
                            send_frag_ack(sess.token, h.slot, slot, out);
                        }
                        None
                    }
                    Phase::Running if h.flags & flags::REQ_ACK != 0 => {
                        stats.duplicates += 1;
                        send_simple(Kind::Working, sess.token, h.slot, slot, out);
                        None
                    }
                    Phase::Done(_) if h.flags & flags::REQ_ACK != 0 => {
                        stats.duplicates += 1;
                        send_result(sess.token, sess.frag_size, sess.window, h.slot, slot, out);
                        None
                    }
                    _ => {
                        stats.duplicates += 1;
                        None
                    }
                }
            }
            Kind::Probe if h.call_no == slot.call_no => {
                match slot.phase {
                    Phase::Running => send_simple(Kind::Working, sess.token, h.slot, slot, out),
                    Phase::Done(_) => send_result(sess.token, sess.frag_size, sess.window, h.slot, slot, out),
                    Phase::Receiving => send_frag_ack(sess.token, h.slot, slot, out),
                    Phase::Empty | Phase::Acked => {}
                }
                None
            }
            Kind::Ack if h.call_no == slot.call_no => {
                if matches!(slot.phase, Phase::Done(_)) {
                    slot.phase = Phase::Acked;
                    release(slot);
                }
                None
            }
            Kind::FragAck if h.call_no == slot.call_no => {
                if let (Phase::Done(Status::Ok), Some(bits)) = (slot.phase, body.get(..8)) {
                    let bitmap = u64::from_le_bytes(bits.try_into().unwrap_or([0; 8]));
                    let stalled = h.flags & flags::STALLED != 0;
                    let mut pending = Burst::new();
                    slot.tx.on_ack(h.offset, bitmap, stalled, |i, r| pending.push(i, r));
                    for (i, r) in pending.iter() {
                        emit_result_frag(sess.token, h.slot, slot, i, r, out);
                    }
                }
                None
            }
            _ => {
                stats.malformed += 1;
                None
            }
        }
    }

    /// The server's counterpart of the client's one-frame fast path: a call sent whole in one
    /// frame on a reliable session, recognised by its header against the one its slot expects
    /// next ([`Header::whole_call`] with the slot's next call number and the body's length: every
    /// byte compared, [`Header::read_whole_call`]) instead of being decoded; it then runs as
    /// [`handle`](Self::handle) would run it.
    /// `None` for anything else (another kind, a repeat or a stale call, a call still running,
    /// one larger than the session allows, a fragment, an unreliable session): give the frame to
    /// `handle`, which treats every case.
    #[inline]
    pub fn take_whole_call<'a>(&'a mut self, from: A, frame: &'a [u8]) -> Option<IncomingCall<'a>> {
        let (head, body) = frame.split_first_chunk::<HEADER_LEN>()?;
        let len = u32::try_from(body.len()).ok()?;
        let c = Header::read_whole_call(head, len)?;
        let idx = self.session_index(c.token)?;
        let sess = self.sessions[idx].as_mut()?;
        if !sess.reliable || len > sess.max_message {
            return None;
        }
        let slot = sess.slots.get_mut(c.slot as usize)?;
        // The slot's next call, on a slot resting acknowledged between calls (or empty before
        // its first), as a reliable session's slots do.
        if c.call_no != slot.call_no.wrapping_add(1) || !matches!(slot.phase, Phase::Acked | Phase::Empty) {
            return None;
        }
        sess.active = true;
        slot.peer = Some(from);
        slot.call_no = c.call_no;
        slot.phase = Phase::Running;
        slot.result.clear();
        self.stats.calls += 1;
        Some(IncomingCall {
            key: CallKey { token: c.token, slot: c.slot, call_no: c.call_no },
            program: sess.program,
            version: sess.version,
            proc_no: c.proc_no,
            client_order: sess.client_order,
            args: body,
            reply: &mut slot.result,
        })
    }

    fn handle_bind(
        &mut self,
        from: A,
        h: &Header,
        body: &[u8],
        now: Instant,
        out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8]),
    ) {
        let mut reply = Header::new(Kind::BindRefused);
        reply.call_no = h.call_no;
        let refuse = |this: &mut Self, out: &mut SendTo<'_, A>, r: Refusal| {
            this.stats.refused_binds += 1;
            out(&from, &reply.to_bytes(), &BindRefusal(r).emit());
        };
        let Ok(req) = BindRequest::parse(body) else {
            return refuse(self, out, Refusal::Malformed);
        };
        if req.proto_min > PROTOCOL_VERSION || req.proto_max < PROTOCOL_VERSION {
            return refuse(self, out, Refusal::ProtocolMismatch { low: PROTOCOL_VERSION, high: PROTOCOL_VERSION });
        }
        if (req.max_frame as usize) <= HEADER_LEN || req.window < 2 {
            return refuse(self, out, Refusal::Malformed);
        }
        let Some(p) = self.cfg.programs.iter().find(|p| p.program == req.program).copied() else {
            return refuse(self, out, Refusal::UnknownProgram { program: req.program });
        };
        if req.version < p.low || req.version > p.high {
            return refuse(self, out, Refusal::VersionMismatch { low: p.low, high: p.high });
        }
        // A retransmitted bind gets the session the first one created.
        let existing =
            self.sessions.iter().position(|s| s.as_ref().is_some_and(|s| s.nonce == req.nonce && s.bind_peer == from));
        let idx = match existing {
            Some(i) => i,
            None => {
                let mut free = self.sessions.iter().position(Option::is_none);
                if free.is_none() {
                    self.sweep(now);
                    free = self.sessions.iter().position(Option::is_none);
                }
                let Some(i) = free else {
                    return refuse(self, out, Refusal::TooManySessions);
                };
                let token = (self.generation as u64) << 48 | (i as u64) << 32 | (splitmix(&mut self.rng) & 0xFFFF_FFFF);
                let reliable = req.flags & BIND_RELIABLE != 0;
                let max_frame = if reliable { u32::MAX } else { req.max_frame.min(self.cfg.max_frame) };
                let max_message = req.max_message.min(self.cfg.max_message);
                let slots = req.slots.clamp(1, self.cfg.max_slots);
                self.sessions[i] = Some(Session {
                    token,
                    nonce: req.nonce,
                    bind_peer: from,
                    program: req.program,
                    version: req.version,
                    client_order: req.byte_order,
                    reliable,
                    frag_size: max_frame.saturating_sub(HEADER_LEN as u32).max(1),
                    window: req.window.min(self.cfg.window).max(2),
                    max_message,
                    last_active: now,
                    active: false,
                    slots: (0..slots)
                        .map(|_| Slot {
                            peer: None,
                            call_no: 0,
                            phase: Phase::Empty,
                            rx: FragReceiver::default(),
                            result: Vec::new(),
                            tx: FragSender::default(),
                        })
                        .collect(),
                });
                self.live += 1;
                if self.next_sweep.is_none() {
                    self.next_sweep = Some(now + self.cfg.session_idle / 4);
                }
                i
            }
        };
        let s = self.sessions[idx].as_ref().expect("just found or created");
        let grant = BindGrant {
            slots: s.slots.len() as u16,
            window: s.window,
            byte_order: ByteOrder::native(),
            max_message: s.max_message,
            max_frame: if s.reliable { req.max_frame } else { s.frag_size + HEADER_LEN as u32 },
            generation: self.generation,
        };
        let mut ok = Header::new(Kind::BindOk);
        ok.call_no = h.call_no;
        ok.token = s.token;
        out(&from, &ok.to_bytes(), &grant.emit());
    }

    fn slot_of(&mut self, key: CallKey) -> Option<(&mut Session<A>, usize)> {
        let idx = self.session_index(key.token)?;
        let sess = self.sessions[idx].as_mut()?;
        let slot = sess.slots.get(key.slot as usize)?;
        (slot.call_no == key.call_no && slot.phase == Phase::Running).then_some((sess, key.slot as usize))
    }

    /// Completes a call whose result the procedure appended to the `reply` buffer it was given.
    /// Returns false when the call is no longer wanted (session expired or slot reused).
    pub fn finish(&mut self, key: CallKey, status: Status, out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8])) -> bool {
        let Some((sess, i)) = self.slot_of(key) else { return false };
        let (token, frag, window, reliable) = (sess.token, sess.frag_size, sess.window, sess.reliable);
        let max_message = sess.max_message as usize;
        let slot = &mut sess.slots[i];
        // A result larger than the session allows is refused, as an oversized call is.
        let status = match status {
            Status::Ok if slot.result.len() > max_message => {
                slot.result.clear();
                Status::Error(ErrorCode::TooLarge)
            }
            s => s,
        };
        slot.phase = Phase::Done(status);
        if reliable && status == Status::Ok && slot.result.len() <= frag as usize {
            // A reliable session's fragment is as large as its messages: the result goes in one
            // frame, as `send_result` would send it, without setting up the fragment sender
            // (nothing is retransmitted or acknowledged by fragment on such a session).
            if let Some(peer) = slot.peer.as_ref() {
                out(peer, &one_frame_result(token, key.slot, slot, slot.result.len()), &slot.result);
            }
        } else {
            send_result(token, frag, window, key.slot, slot, out);
        }
        if reliable || matches!(status, Status::Error(_)) {
            // Nothing to retransmit on a reliable stream; errors are cheap to recompute.
            slot.phase = Phase::Acked;
            release(slot);
        }
        true
    }

    /// Completes a call whose procedure wrote its `len`-byte result straight where the transport
    /// will send it from (a shared-memory result ring): returns the header to put before it.
    /// `None` when that cannot be the reply (a failed call, a result larger than the session
    /// allows, a session that may need the result again to retransmit it, a call no longer
    /// wanted): then finish it with [`finish_with`](Self::finish_with) as usual.
    pub fn finish_placed(&mut self, key: CallKey, status: Status, len: usize) -> Option<[u8; HEADER_LEN]> {
        let (sess, i) = self.slot_of(key)?;
        if !sess.reliable || status != Status::Ok || len > sess.max_message as usize || len > sess.frag_size as usize {
            return None;
        }
        let slot = &mut sess.slots[i];
        slot.peer.as_ref()?;
        let head = one_frame_result(sess.token, key.slot, slot, len);
        slot.phase = Phase::Acked;
        release(slot);
        Some(head)
    }

    /// Completes a call with a result produced elsewhere (copied into the slot).
    pub fn finish_with(
        &mut self,
        key: CallKey,
        status: Status,
        result: &[u8],
        out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8]),
    ) -> bool {
        let Some((sess, i)) = self.slot_of(key) else { return false };
        let slot = &mut sess.slots[i];
        slot.result.clear();
        slot.result.extend_from_slice(result);
        self.finish(key, status, out)
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Drops sessions idle past the limit.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_sweep.is_some_and(|t| now >= t) {
            self.sweep(now);
            self.next_sweep = (self.live > 0).then(|| now + self.cfg.session_idle / 4);
        }
    }

    /// A session that sent anything since the last sweep is stamped with this sweep's time (no
    /// earlier than its last frame); one stamped at least `session_idle` ago goes. So a session
    /// never goes before it has been idle that long, and, with sweeps every quarter of it (as
    /// `poll_timeout` asks), goes within one and a half times that long.
    fn sweep(&mut self, now: Instant) {
        let idle = self.cfg.session_idle;
        for s in self.sessions.iter_mut() {
            let Some(sess) = s.as_mut() else { continue };
            if std::mem::take(&mut sess.active) {
                sess.last_active = now;
            } else if now.saturating_duration_since(sess.last_active) >= idle {
                *s = None;
                self.live -= 1;
                self.stats.expired_sessions += 1;
            }
        }
    }

    /// Forgets a peer whose connection closed (stream transports): sessions bound by it, and
    /// whose slots all came from it, go at once rather than at expiry.
    pub fn forget_peer(&mut self, peer: &A) {
        for s in self.sessions.iter_mut() {
            let Some(sess) = s.as_mut() else { continue };
            for slot in sess.slots.iter_mut() {
                if slot.peer.as_ref() == Some(peer) {
                    slot.peer = None;
                }
            }
            let orphaned = sess.reliable && sess.slots.iter().all(|sl| sl.peer.is_none());
            if orphaned && (sess.bind_peer == *peer || sess.slots.iter().any(|sl| sl.call_no != 0)) {
                *s = None;
                self.live -= 1;
            }
        }
    }
}

fn release<A>(slot: &mut Slot<A>) {
    if slot.result.capacity() > KEEP_CAPACITY {
        slot.result = Vec::new();
    }
    slot.rx.shrink(KEEP_CAPACITY);
}

fn base_header<A>(kind: Kind, token: u64, slot_no: u16, slot: &Slot<A>) -> Header {
    let mut h = Header::new(kind);
    h.token = token;
    h.slot = slot_no;
    h.call_no = slot.call_no;
    h
}

fn send_simple<A>(
    kind: Kind,
    token: u64,
    slot_no: u16,
    slot: &Slot<A>,
    out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8]),
) {
    if let Some(peer) = slot.peer.as_ref() {
        out(peer, &base_header(kind, token, slot_no, slot).to_bytes(), &[]);
    }
}

fn send_frag_ack<A>(token: u64, slot_no: u16, slot: &Slot<A>, out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8])) {
    let Some(peer) = slot.peer.as_ref() else { return };
    let (cum, bitmap) = slot.rx.ack_state();
    let mut h = base_header(Kind::FragAck, token, slot_no, slot);
    h.total_len = slot.rx.total();
    h.offset = cum;
    out(peer, &h.to_bytes(), &bitmap.to_le_bytes());
}

fn emit_result_frag<A>(
    token: u64,
    slot_no: u16,
    slot: &Slot<A>,
    i: u32,
    req_ack: bool,
    out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8]),
) {
    let Some(peer) = slot.peer.as_ref() else { return };
    let r = slot.tx.range(i);
    let mut h = base_header(Kind::Result, token, slot_no, slot);
    h.total_len = slot.result.len() as u32;
    h.offset = r.start as u32;
    h.flags = if req_ack { flags::REQ_ACK } else { 0 };
    out(peer, &h.to_bytes(), &slot.result[r]);
}

/// The header of a result sent whole in one frame on a reliable session.
fn one_frame_result<A>(token: u64, slot_no: u16, slot: &Slot<A>, len: usize) -> [u8; HEADER_LEN] {
    Header::whole_result(token, slot_no, slot.call_no, len as u32).to_bytes()
}

/// Sends (or sends again from the start) the slot's finished result.
fn send_result<A>(
    token: u64,
    frag_size: u32,
    window: u16,
    slot_no: u16,
    slot: &mut Slot<A>,
    out: &mut impl FnMut(&A, &[u8; HEADER_LEN], &[u8]),
) {
    match slot.phase {
        Phase::Done(Status::Error(code)) => {
            let Some(peer) = slot.peer.as_ref() else { return };
            // The reason, as much of it as one frame carries.
            let message = ErrorMessage::fit(&slot.result, frag_size as usize);
            let mut h = base_header(Kind::Error, token, slot_no, slot);
            h.proc_or_code = code.to_u32();
            h.total_len = message.as_bytes().len() as u32;
            out(peer, &h.to_bytes(), message.as_bytes());
        }
        Phase::Done(Status::Ok) => {
            slot.tx.reset(slot.result.len() as u32, frag_size, window as u32);
            if let Some(req_ack) = slot.tx.send_single() {
                emit_result_frag(token, slot_no, slot, 0, req_ack, out);
                return;
            }
            let mut pending = Burst::new();
            slot.tx.send_new(|i, r| pending.push(i, r));
            for (i, r) in pending.iter() {
                emit_result_frag(token, slot_no, slot, i, r, out);
            }
        }
        _ => {}
    }
}
