//! The server side: sessions, at-most-once execution, reassembly of calls and sending of results.
//!
//! The server keeps, per session and slot, the last call number and (until acknowledged) its
//! result. A duplicate of a finished call gets the saved result again, a duplicate of a running
//! call gets "still working", anything older is dropped: a procedure never runs twice for one
//! call. The server never retransmits on its own; the client's timers drive recovery, so the only
//! server timer is session expiry.
//!
//! Sessions are found by the index in their token, not by hashing (Firefly §4.2.5); the rest of
//! the token comes from the server's secret, so it cannot be guessed. State is bounded by
//! `max_sessions` × slots × `max_message`, and sessions idle past `session_idle` are dropped.
//!
//! Nobody gets state before proving they receive at their address: over datagrams (and
//! whenever a pre-shared key is configured) a first bind is answered with a stateless cookie
//! (`BindRetry`), and only a bind that returns a valid one makes a session. Sessions that never
//! make a call go after `unused_idle`; a full table gives up its least recently used idle
//! session (never-called ones first) before it refuses a bind; one source address holds at most
//! `max_sessions_per_source` sessions. With a pre-shared key, a bind must prove the key, and every
//! frame of the session carries a tag under the session's keys: a frame whose tag fails is
//! dropped and counted, and replays are stale call numbers (`crate::auth`).
//!
//! Use: feed frames with [`ServerEngine::handle`]; when it returns an [`IncomingCall`], run the
//! procedure (it reads `args` and appends its result to `reply`), then call
//! [`ServerEngine::finish`]. Over a reliable channel, offer each frame to
//! [`ServerEngine::take_whole_call`] first: it takes the common case, a call sent whole, without
//! decoding it. A procedure run elsewhere (a worker pool) copies the arguments,
//! and its result comes back through [`ServerEngine::finish_with`]. A call that fails is
//! finished with [`Status::Error`] and, in place of the result, the reason in UTF-8 (or
//! nothing): it goes to the client in the `Error` frame ([`ErrorMessage`], cut to fit one frame).

use core::hash::Hash;
use core::time::Duration;
use std::time::Instant;

use crate::auth::{self, FrameKeys, Psk, ServerSecret, Side, Tag};
use crate::frag::{Burst, FragReceiver, FragSender};
use crate::seal::{head_len, CipherKind, Guard, Opener, SealKeys, Sealer, SEALED_HEAD_LEN};
use crate::wire::{
    flags, Bind, BindGrant, BindRefusal, BindRequest, ByteOrder, ErrorCode, ErrorMessage, Header, Kind, PathChallenge,
    Refusal, BIND_KEYED, BIND_SEALED, BIND_SEAL_AES, HEADER_LEN, PROTOCOL_VERSION, TAG_LEN,
};
use crate::MAX_WINDOW;

/// A program the server serves, with the range of versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramVersions {
    /// The program number.
    pub program: u32,
    /// Lowest version served.
    pub low: u32,
    /// Highest version served.
    pub high: u32,
}

/// Limits and timers of a server.
#[derive(Clone, Debug)]
pub struct ServerEngineConfig {
    /// What may be bound: a bind for anything else is refused.
    pub programs: Vec<ProgramVersions>,
    /// Sessions at once (at most 65536: the index is 16 bits of the token).
    pub max_sessions: usize,
    /// Call slots a session may have (a bind asking more gets this many; at least 1).
    pub max_slots: u16,
    /// Largest message, arguments or result, in bytes (a bind asking more gets this).
    pub max_message: u32,
    /// Largest frame this server's transport carries.
    pub max_frame: u32,
    /// Fragments in flight per message at most (kept within 2 to [`MAX_WINDOW`]).
    pub window: u16,
    /// Sessions idle this long are dropped (by a sweep every quarter of it: within one and a half
    /// times this long).
    pub session_idle: Duration,
    /// Sessions that have made no call this long after their bind are dropped (within one and a
    /// quarter times this long): an honest client calls soon after binding.
    pub unused_idle: Duration,
    /// Sessions one source (an IP address, a MAC address: see [`ServerEngine::with_source`])
    /// holds at once.
    pub max_sessions_per_source: usize,
    /// The transport delivers every frame, in order (TCP, shared memory): sessions keep no
    /// results for retransmission and take frames of any size. Set by whoever opens the
    /// transport, never from what a client says.
    pub reliable: bool,
    /// Binds must prove this key, and every frame of a session carries a tag under keys derived
    /// from it. `None`: unauthenticated sessions.
    pub psk: Option<Psk>,
    /// Every session must be sealed (its frames encrypted, `crate::seal`): an unsealed bind is
    /// refused with [`Refusal::EncryptionRequired`]. Without it, a client may still ask for a
    /// sealed session (it decides its own secrecy). Needs `psk`.
    pub require_sealed: bool,
    /// Bind cookies are made under a key that changes this often; a cookie is good for the
    /// period it was made in and the next.
    pub cookie_period: Duration,
    /// Seed of the server generation (give it real randomness).
    pub seed: u64,
    /// The server's secret: cookie keys and the random bits of session tokens (give it 32
    /// random bytes).
    pub secret: [u8; 32],
}

impl Default for ServerEngineConfig {
    fn default() -> Self {
        ServerEngineConfig {
            programs: Vec::new(),
            max_sessions: 1024,
            max_slots: 64,
            max_message: 4 << 20,
            max_frame: 1472,
            window: 32,
            session_idle: Duration::from_secs(120),
            unused_idle: Duration::from_secs(5),
            max_sessions_per_source: 128,
            reliable: false,
            psk: None,
            require_sealed: false,
            cookie_period: Duration::from_secs(60),
            seed: 0x9E37_79B9_7F4A_7C15,
            secret: [0x5A; 32],
        }
    }
}

/// Identifies a running call, to finish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallKey {
    /// The session's token.
    pub token: u64,
    /// The call's slot in the session.
    pub slot: u16,
    /// The call's number on its slot.
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
    /// Which call this is: hand it back to [`ServerEngine::finish`] with the outcome.
    pub key: CallKey,
    /// The program number (one the session was bound to).
    pub program: u32,
    /// The version bound.
    pub version: u32,
    /// The procedure number (unchecked: the caller knows its procedures).
    pub proc_no: u32,
    /// The byte order of the client (arguments arrive in the server's order; see `wire`).
    pub client_order: ByteOrder,
    /// The arguments, in the server's byte order (unvalidated).
    pub args: &'a [u8],
    /// Where the procedure writes its result, in the server's byte order (empty at the start).
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
    /// Where the slot's answers go. Over datagrams only a proven address: the bind's, or one
    /// that answered a path challenge on this slot (a client may call from a socket per slot).
    /// A frame from any other address is answered with a challenge only (QUIC's address
    /// validation, RFC 9000 §8-9).
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
    /// The cookie's MAC the session was made with (zero without a cookie round): a bind
    /// repeated with another cookie is another bind.
    server_nonce: Tag,
    /// Over datagrams, proven by the bind's cookie round: frames from it are answered on any slot.
    bind_peer: A,
    /// The source `bind_peer` counts against.
    source: u128,
    /// Frame keys, on a session bound with a pre-shared key.
    keys: Option<FrameKeys>,
    /// On a sealed session: what seals the frames sent (the keys' tags are then unused, but for
    /// `UnknownSession`)...
    seal_send: Option<Sealer>,
    /// ... and what opens the frames received.
    seal_recv: Option<Opener>,
    bound_at: Instant,
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

impl<A> Session<A> {
    /// Whether any call ever came on this session.
    fn called(&self) -> bool {
        self.slots.iter().any(|s| s.phase != Phase::Empty)
    }

    /// How willing the server is to give this session up for a new one, lowest first: sessions
    /// that never called, then those quiet since the last sweep, the longest quiet first. `None`
    /// while a call is arriving or running.
    fn reclaim_rank(&self) -> Option<(bool, bool, Instant)> {
        (!self.busy())
            .then(|| (self.called(), self.active, if self.called() { self.last_active } else { self.bound_at }))
    }

    /// A slot that still needs the session alive: a call arriving or running. Such a session is
    /// never swept (its procedure will finish), so nothing but new work need keep it live.
    fn busy(&self) -> bool {
        self.slots.iter().any(|s| matches!(s.phase, Phase::Receiving | Phase::Running))
    }
}

/// Binds refused, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    /// The program is not served.
    pub unknown_program: u64,
    /// The program is served, but not the version.
    pub version: u64,
    /// The client speaks no protocol version the server does.
    pub protocol: u64,
    /// The request was malformed (a frame too small, a window under 2, ...).
    pub malformed: u64,
    /// The session table was full of sessions with calls in progress.
    pub full: u64,
    /// The client's source held [`ServerEngineConfig::max_sessions_per_source`] sessions.
    pub source_limit: u64,
    /// The server has a pre-shared key; the client had none.
    pub key_required: u64,
    /// The client had a pre-shared key; the server has none.
    pub key_not_expected: u64,
    /// The client's proof of its key was wrong.
    pub bad_key: u64,
    /// The server seals every session; the client did not ask to, or asked without a key.
    pub encryption: u64,
}

impl Refusals {
    /// Binds refused, all causes together.
    pub fn total(&self) -> u64 {
        self.unknown_program
            + self.version
            + self.protocol
            + self.malformed
            + self.full
            + self.source_limit
            + self.key_required
            + self.key_not_expected
            + self.bad_key
            + self.encryption
    }

    fn count(&mut self, r: Refusal) {
        *match r {
            Refusal::UnknownProgram { .. } => &mut self.unknown_program,
            Refusal::VersionMismatch { .. } => &mut self.version,
            Refusal::ProtocolMismatch { .. } => &mut self.protocol,
            Refusal::TooManySessions => &mut self.full,
            Refusal::SourceLimit => &mut self.source_limit,
            Refusal::KeyRequired => &mut self.key_required,
            Refusal::KeyNotExpected => &mut self.key_not_expected,
            Refusal::BadKey => &mut self.bad_key,
            Refusal::EncryptionRequired | Refusal::EncryptionUnavailable => &mut self.encryption,
            Refusal::Malformed | Refusal::Unknown(_) => &mut self.malformed,
        } += 1;
    }
}

/// What the engine did, answered on its own and dropped, for a person to read: plain counters,
/// kept by the serving thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// New calls received (each once, however many copies came).
    pub calls: u64,
    /// Copies of finished calls answered from the saved result.
    pub duplicates: u64,
    /// Copies of running calls answered "working".
    pub working: u64,
    /// Copies of calls older than their slot's current one, and other copies not answered.
    pub stale: u64,
    /// Frames the client marked as retransmissions (call fragments, probes, stalled
    /// acknowledgements).
    pub retransmits_received: u64,
    /// Call fragments received for messages larger than one frame.
    pub fragments_received: u64,
    /// Calls refused by the engine for exceeding the session's largest message.
    pub too_large: u64,
    /// Frames that were not lowlat frames or made no sense where they came.
    pub malformed: u64,
    /// Frames for a session the server does not know.
    pub unknown_session: u64,
    /// Frames of a keyed session whose tag was missing or wrong (dropped).
    pub mac_failures: u64,
    /// Sessions dropped for idleness (or for never making a call).
    pub sessions_expired: u64,
    /// Idle sessions given up to make room for a new one.
    pub sessions_reclaimed: u64,
    /// Sessions dropped because their stream connections all closed.
    pub sessions_closed: u64,
    /// Binds that made a new session.
    pub binds_granted: u64,
    /// Retransmitted binds answered with the session the first one made.
    pub binds_repeated: u64,
    /// Cookies sent in `BindRetry` answers.
    pub cookies_issued: u64,
    /// Binds whose cookie was forged, another address's or nonce's, or expired (a new one is
    /// issued).
    pub cookies_rejected: u64,
    /// Binds refused, by cause.
    pub refused: Refusals,
    /// Frames of a session from an address it has not proven (not run, not answered but with a
    /// path challenge).
    pub unproven: u64,
    /// Path challenges sent.
    pub path_challenges: u64,
    /// Addresses that answered a challenge: the session's answers go there since.
    pub paths_validated: u64,
    /// Path responses whose challenge was forged, another address's, or expired.
    pub path_failures: u64,
    /// Answers not sent to an address not yet proven because they were larger than what it had
    /// sent (no amplification before validation).
    pub withheld: u64,
}

/// The server's protocol state for one transport endpoint. `A` is the transport's peer address.
#[derive(Debug)]
pub struct ServerEngine<A> {
    cfg: ServerEngineConfig,
    generation: u16,
    secret: ServerSecret,
    /// Session tokens made so far (numbers the random bits of the next).
    tokens: u64,
    sessions: Vec<Option<Session<A>>>,
    live: usize,
    next_sweep: Option<Instant>,
    source_of: fn(&A) -> u128,
    /// What the engine did on its own since it was made.
    pub stats: ServerStats,
}

/// The callback a server engine sends frames through: (peer, header, body). The header is 32
/// bytes, or 48 with the tag of a keyed session.
type SendTo<'a, A> = dyn FnMut(&A, &[u8], &[u8]) + 'a;

/// Results larger than this are released when acknowledged, not kept for the next call.
const KEEP_CAPACITY: usize = 256 * 1024;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Each peer address its own source (no two peers share a limit).
fn each_peer<A: Hash>(a: &A) -> u128 {
    let mut h = std::hash::DefaultHasher::new();
    a.hash(&mut h);
    std::hash::Hasher::finish(&h) as u128
}

impl<A: Copy + Eq + Hash> ServerEngine<A> {
    /// An engine whose every peer address is a source of its own (see
    /// [`with_source`](Self::with_source)).
    pub fn new(cfg: ServerEngineConfig) -> ServerEngine<A> {
        ServerEngine::with_source(cfg, each_peer::<A>)
    }

    /// An engine that counts the sessions of peers by `source_of` their address (the IP address
    /// of a UDP peer, whatever its port; the MAC of an Ethernet peer) against
    /// `max_sessions_per_source`.
    pub fn with_source(mut cfg: ServerEngineConfig, source_of: fn(&A) -> u128) -> ServerEngine<A> {
        cfg.max_sessions = cfg.max_sessions.clamp(1, 1 << 16);
        cfg.max_sessions_per_source = cfg.max_sessions_per_source.max(1);
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
            secret: ServerSecret::new(&cfg.secret, cfg.cookie_period),
            tokens: 0,
            sessions: (0..cfg.max_sessions).map(|_| None).collect(),
            live: 0,
            next_sweep: None,
            source_of,
            cfg,
            stats: ServerStats::default(),
        }
    }

    /// Whether a bind must return a cookie before it gets a session: over datagrams (the peer
    /// must show it receives at its address) and with a key (the cookie is the server's nonce).
    fn needs_cookie(&self) -> bool {
        !self.cfg.reliable || self.cfg.psk.is_some()
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

    /// Feeds one frame received from `from`. `now` is asked only by a bind and by a frame from
    /// an address its session has not proven: serving a call reads no clock (a read costs
    /// ~30 ns in a VM, a tenth of a shared-memory round trip).
    ///
    /// Before an address is proven (a bind's cookie round, a path challenge), nothing sent to it
    /// is larger than the frame it sent: refusals, cookies, `UnknownSession` errors and
    /// challenges too. A frame changes a session's state, its liveness included, only once its
    /// tag and its call number have passed: a replay changes nothing.
    pub fn handle<'a>(
        &'a mut self,
        from: A,
        frame: &'a [u8],
        now: impl FnOnce() -> Instant,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) -> Option<IncomingCall<'a>> {
        let Ok((h, body)) = Header::parse(frame) else {
            self.stats.malformed += 1;
            return None;
        };
        if h.kind == Kind::Bind {
            self.handle_bind(from, &h, frame.len(), body, now(), out);
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
                // No session, no session keys; but a keyed client can believe the key's own.
                let key = self.cfg.psk.as_ref().map(Psk::unbound_key);
                let mut g = Guard::of(key, None);
                if g.head_len() <= frame.len() {
                    g.emit(e, &[], &mut |hd, b| out(&from, hd, b));
                } else {
                    self.stats.withheld += 1;
                }
            }
            return None;
        };
        let stats = &mut self.stats;
        let sess = self.sessions[idx].as_mut().expect("index checked above");
        // Nothing of a frame is believed before its tag is checked.
        let body = match (&sess.keys, &mut sess.seal_recv) {
            (None, _) if h.flags & flags::TAGGED != 0 => {
                stats.malformed += 1;
                return None;
            }
            (None, _) => body,
            (Some(_), Some(opener)) => match opener.open(frame) {
                Some(b) => b,
                None => {
                    stats.mac_failures += 1;
                    return None;
                }
            },
            (Some(k), None) => match auth::open(&k.recv, frame, body) {
                Some(b) => b,
                None => {
                    stats.mac_failures += 1;
                    return None;
                }
            },
        };
        let mut guard = Guard::of(sess.keys.as_ref().map(|k| &k.send), sess.seal_send.as_mut());
        let Some(slot) = sess.slots.get_mut(h.slot as usize) else {
            stats.malformed += 1;
            return None;
        };
        if !sess.reliable && slot.peer != Some(from) && from != sess.bind_peer {
            // An address the slot has not proven: a response proves it; anything else is
            // answered with a challenge (no larger than the frame), and changes nothing.
            let now = now();
            if h.kind == Kind::PathResponse {
                if self.secret.check_path(&from, sess.token, &PathChallenge::read(&h), now) {
                    slot.peer = Some(from);
                    stats.paths_validated += 1;
                } else {
                    stats.path_failures += 1;
                }
                return None;
            }
            stats.unproven += 1;
            let challenge = self.secret.path_challenge(&from, sess.token, now);
            if guard.head_len() <= frame.len() {
                stats.path_challenges += 1;
                guard.emit(challenge.header(Kind::PathChallenge, h.token, h.slot), &[], &mut |hd, b| out(&from, hd, b));
            } else {
                stats.withheld += 1;
            }
            return None;
        }
        if h.flags & flags::RETRANSMIT != 0 {
            stats.retransmits_received += 1;
        }
        slot.peer = Some(from);
        let g = &mut guard;
        match h.kind {
            Kind::Call => {
                if h.call_no.wrapping_sub(slot.call_no) as i32 > 0 || slot.phase == Phase::Empty {
                    // A new call: it acknowledges the previous result, and shows the session
                    // alive (a replay never gets here: its number is not new).
                    sess.active = true;
                    if h.total_len > sess.max_message {
                        stats.too_large += 1;
                        slot.call_no = h.call_no;
                        slot.result.clear();
                        slot.phase = Phase::Done(Status::Error(ErrorCode::TooLarge));
                        send_result(g, sess.token, sess.frag_size, sess.window, h.slot, slot, out);
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
                    stats.stale += 1;
                    return None; // older than the current call: a stale duplicate
                }
                match slot.phase {
                    Phase::Receiving => {
                        stats.fragments_received += 1;
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
                            send_frag_ack(g, sess.token, h.slot, slot, out);
                        }
                        None
                    }
                    Phase::Running if h.flags & flags::REQ_ACK != 0 => {
                        stats.working += 1;
                        send_simple(g, Kind::Working, sess.token, h.slot, slot, out);
                        None
                    }
                    Phase::Done(_) if h.flags & flags::REQ_ACK != 0 => {
                        stats.duplicates += 1;
                        send_result(g, sess.token, sess.frag_size, sess.window, h.slot, slot, out);
                        None
                    }
                    _ => {
                        stats.stale += 1;
                        None
                    }
                }
            }
            Kind::Probe if h.call_no == slot.call_no => {
                match slot.phase {
                    Phase::Running => {
                        stats.working += 1;
                        send_simple(g, Kind::Working, sess.token, h.slot, slot, out)
                    }
                    Phase::Done(_) => {
                        stats.duplicates += 1;
                        send_result(g, sess.token, sess.frag_size, sess.window, h.slot, slot, out)
                    }
                    Phase::Receiving => send_frag_ack(g, sess.token, h.slot, slot, out),
                    Phase::Empty | Phase::Acked => {}
                }
                None
            }
            Kind::Ack if h.call_no == slot.call_no => {
                if matches!(slot.phase, Phase::Done(_)) {
                    sess.active = true;
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
                        emit_result_frag(g, sess.token, h.slot, slot, i, r, out);
                    }
                }
                None
            }
            // A response from the proven address itself: nothing to prove.
            Kind::PathResponse => None,
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
        // A keyed session's frames carry a tag: the general path checks it.
        if !sess.reliable || sess.keys.is_some() || len > sess.max_message {
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

    /// A bind: checked (stateless refusals first), then, where the transport or a key asks
    /// for it, answered with a cookie until it comes back with a valid one; then given the
    /// session a retransmission of it already has, or a new one in room the table makes.
    ///
    /// Until the cookie comes back the address is unproven: no answer is larger than the
    /// `frame_len` bytes it sent (an honest bind always has room for every answer). Under a key
    /// every cookie and refusal is tagged over the client's nonce ([`Psk::bind_answer_tag`]).
    fn handle_bind(
        &mut self,
        from: A,
        h: &Header,
        frame_len: usize,
        body: &[u8],
        now: Instant,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        // Binds read the clock anyway: a server flooded with frames may never time out.
        self.handle_timeout(now);
        let Ok(bind) = Bind::parse(body) else {
            self.stats.refused.count(Refusal::Malformed);
            self.answer_bind(
                &from,
                Kind::BindRefused,
                h,
                None,
                &BindRefusal(Refusal::Malformed).emit(),
                frame_len,
                out,
            );
            return;
        };
        let req = bind.request;
        let refuse = |this: &mut Self, out: &mut SendTo<'_, A>, r: Refusal| {
            this.stats.refused.count(r);
            this.answer_bind(&from, Kind::BindRefused, h, Some(req.nonce), &BindRefusal(r).emit(), frame_len, out);
        };
        let sealed = req.flags & BIND_SEALED != 0;
        if req.proto_min > PROTOCOL_VERSION || req.proto_max < PROTOCOL_VERSION {
            return refuse(self, out, Refusal::ProtocolMismatch { low: PROTOCOL_VERSION, high: PROTOCOL_VERSION });
        }
        let least_frame = if sealed { SEALED_HEAD_LEN } else { HEADER_LEN + TAG_LEN };
        if (req.max_frame as usize) <= least_frame || req.window < 2 {
            return refuse(self, out, Refusal::Malformed);
        }
        let Some(p) = self.cfg.programs.iter().find(|p| p.program == req.program).copied() else {
            return refuse(self, out, Refusal::UnknownProgram { program: req.program });
        };
        if req.version < p.low || req.version > p.high {
            return refuse(self, out, Refusal::VersionMismatch { low: p.low, high: p.high });
        }
        match (self.cfg.psk.is_some(), req.flags & BIND_KEYED != 0) {
            (true, false) => return refuse(self, out, Refusal::KeyRequired),
            (false, true) => return refuse(self, out, Refusal::KeyNotExpected),
            (false, false) if sealed => return refuse(self, out, Refusal::EncryptionUnavailable),
            (true, true) if self.cfg.require_sealed && !sealed => {
                return refuse(self, out, Refusal::EncryptionRequired)
            }
            _ => {}
        }
        let mut server_nonce = [0u8; TAG_LEN];
        if self.needs_cookie() {
            let cookie = bind.cookie.filter(|c| self.secret.check_cookie(&from, req.nonce, c, now));
            let Some(cookie) = cookie else {
                if bind.cookie.is_some() {
                    self.stats.cookies_rejected += 1;
                }
                let fresh = self.secret.issue_cookie(&from, req.nonce, now);
                if self.answer_bind(&from, Kind::BindRetry, h, Some(req.nonce), &fresh.emit(), frame_len, out) {
                    self.stats.cookies_issued += 1;
                }
                return;
            };
            if let Some(psk) = &self.cfg.psk {
                if !bind.proof.is_some_and(|proof| psk.check_proof(&body[..BindRequest::LEN], &cookie, &proof)) {
                    return refuse(self, out, Refusal::BadKey);
                }
            }
            server_nonce = cookie.mac;
        }
        let source = (self.source_of)(&from);
        let idx = match self.place(&from, source, req.nonce, &server_nonce) {
            Ok(Placed::Existing(i)) => {
                self.stats.binds_repeated += 1;
                i
            }
            Ok(Placed::Free(i)) => self.open_session(i, from, source, &req, server_nonce, now),
            Err(r) => return refuse(self, out, r),
        };
        let s = self.sessions[idx].as_ref().expect("just found or made");
        let grant = BindGrant {
            slots: s.slots.len() as u16,
            window: s.window,
            byte_order: ByteOrder::native(),
            max_message: s.max_message,
            max_frame: if s.reliable { req.max_frame } else { s.frag_size + s.head_len() },
            generation: self.generation,
            sealed: s.seal_send.is_some(),
        };
        let mut ok = Header::new(Kind::BindOk);
        ok.call_no = h.call_no;
        ok.token = s.token;
        // The grant is tagged, not sealed: sealing begins with the first frame after the bind.
        Guard::of(s.keys.as_ref().map(|k| &k.send), None).emit(ok, &grant.emit(), &mut |hd, b| out(&from, hd, b));
    }

    /// Sends a cookie round or a refusal (`kind`) answering the bind `h` with `body`: tagged
    /// under the key over the client's `nonce` when there is a key and the nonce is known, and
    /// only if it is no larger than the `limit` bytes the bind had. Whether it was sent.
    #[allow(clippy::too_many_arguments)]
    fn answer_bind(
        &mut self,
        from: &A,
        kind: Kind,
        h: &Header,
        nonce: Option<u64>,
        body: &[u8],
        limit: usize,
        out: &mut SendTo<'_, A>,
    ) -> bool {
        let mut reply = Header::new(kind);
        reply.call_no = h.call_no;
        let tagged = self.cfg.psk.as_ref().zip(nonce);
        let len = HEADER_LEN + body.len() + if tagged.is_some() { TAG_LEN } else { 0 };
        if len > limit {
            self.stats.withheld += 1;
            return false;
        }
        match tagged {
            None => out(from, &reply.to_bytes(), body),
            Some((psk, nonce)) => {
                reply.flags |= flags::TAGGED;
                let head = reply.to_bytes();
                let mut sealed = [0u8; HEADER_LEN + TAG_LEN];
                sealed[..HEADER_LEN].copy_from_slice(&head);
                sealed[HEADER_LEN..].copy_from_slice(&psk.bind_answer_tag(&head, body, nonce));
                out(from, &sealed, body);
            }
        }
        true
    }

    /// Where the session of a bind from `from` goes: the one a retransmission of it already
    /// has, else a free entry, making room as a full table or source must (reclaiming the idle
    /// session least worth keeping), else why not.
    fn place(&mut self, from: &A, source: u128, nonce: u64, server_nonce: &Tag) -> Result<Placed, Refusal> {
        let mut free = None;
        let mut of_source = 0;
        let mut reclaim: Option<(usize, (bool, bool, Instant))> = None;
        let mut reclaim_in_source: Option<(usize, (bool, bool, Instant))> = None;
        for (i, s) in self.sessions.iter().enumerate() {
            let Some(s) = s else {
                free = free.or(Some(i));
                continue;
            };
            if s.nonce == nonce && s.bind_peer == *from && s.server_nonce == *server_nonce {
                return Ok(Placed::Existing(i));
            }
            let rank = s.reclaim_rank();
            let better = |best: &Option<(usize, (bool, bool, Instant))>| match (rank, best) {
                (Some(r), Some((_, b))) => r < *b,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if better(&reclaim) {
                reclaim = rank.map(|r| (i, r));
            }
            if s.source == source {
                of_source += 1;
                if better(&reclaim_in_source) {
                    reclaim_in_source = rank.map(|r| (i, r));
                }
            }
        }
        if of_source >= self.cfg.max_sessions_per_source {
            let (i, _) = reclaim_in_source.ok_or(Refusal::SourceLimit)?;
            self.reclaim(i);
            return Ok(Placed::Free(i));
        }
        if let Some(i) = free {
            return Ok(Placed::Free(i));
        }
        let (i, _) = reclaim.ok_or(Refusal::TooManySessions)?;
        self.reclaim(i);
        Ok(Placed::Free(i))
    }

    fn reclaim(&mut self, i: usize) {
        if self.sessions[i].take().is_some() {
            self.live -= 1;
            self.stats.sessions_reclaimed += 1;
        }
    }

    /// Makes session `i` for the bind `req` from `from`; returns `i`.
    fn open_session(
        &mut self,
        i: usize,
        from: A,
        source: u128,
        req: &BindRequest,
        server_nonce: Tag,
        now: Instant,
    ) -> usize {
        self.tokens += 1;
        let token = (self.generation as u64) << 48 | (i as u64) << 32 | self.secret.random_bits(self.tokens) as u64;
        let keys = self.cfg.psk.as_ref().map(|psk| psk.session_keys(req.nonce, &server_nonce, token, Side::Server));
        // The bind was checked: sealing was asked with a key (its flags under the key's proof).
        let seal = match &self.cfg.psk {
            Some(psk) if req.flags & BIND_SEALED != 0 => {
                let kind =
                    if req.flags & BIND_SEAL_AES != 0 { CipherKind::Aes256Gcm } else { CipherKind::ChaCha20Poly1305 };
                Some(SealKeys::new(kind, &psk.seal_keys(req.nonce, &server_nonce, token, Side::Server)))
            }
            _ => None,
        };
        let reliable = self.cfg.reliable;
        let head = head_len(keys.is_some(), seal.is_some()) as u32;
        let max_frame = if reliable { u32::MAX } else { req.max_frame.min(self.cfg.max_frame) };
        let slots = req.slots.clamp(1, self.cfg.max_slots);
        self.sessions[i] = Some(Session {
            token,
            nonce: req.nonce,
            server_nonce,
            bind_peer: from,
            source,
            keys,
            seal_send: seal.as_ref().map(|s| s.send.clone()),
            seal_recv: seal.map(|s| s.recv),
            bound_at: now,
            program: req.program,
            version: req.version,
            client_order: req.byte_order,
            reliable,
            frag_size: max_frame.saturating_sub(head).max(1),
            window: req.window.min(self.cfg.window).max(2),
            max_message: req.max_message.min(self.cfg.max_message),
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
        self.stats.binds_granted += 1;
        if self.next_sweep.is_none() {
            self.next_sweep = Some(now + self.sweep_period());
        }
        i
    }

    fn slot_of(&mut self, key: CallKey) -> Option<(&mut Session<A>, usize)> {
        let idx = self.session_index(key.token)?;
        let sess = self.sessions[idx].as_mut()?;
        let slot = sess.slots.get(key.slot as usize)?;
        (slot.call_no == key.call_no && slot.phase == Phase::Running).then_some((sess, key.slot as usize))
    }

    /// Completes a call whose result the procedure appended to the `reply` buffer it was given.
    /// Returns false when the call is no longer wanted (session expired or slot reused).
    pub fn finish(&mut self, key: CallKey, status: Status, out: &mut impl FnMut(&A, &[u8], &[u8])) -> bool {
        let Some((sess, i)) = self.slot_of(key) else { return false };
        let (token, frag, window, reliable) = (sess.token, sess.frag_size, sess.window, sess.reliable);
        let max_message = sess.max_message as usize;
        let mut guard = Guard::of(sess.keys.as_ref().map(|k| &k.send), sess.seal_send.as_mut());
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
                let h = Header::whole_result(token, key.slot, slot.call_no, slot.result.len() as u32);
                guard.emit(h, &slot.result, &mut |hd, b| out(peer, hd, b));
            }
        } else {
            send_result(&mut guard, token, frag, window, key.slot, slot, out);
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
    /// allows, a session that may need the result again to retransmit it or whose frames carry
    /// tags, a call no longer wanted): then finish it with [`finish_with`](Self::finish_with) as
    /// usual.
    pub fn finish_placed(&mut self, key: CallKey, status: Status, len: usize) -> Option<[u8; HEADER_LEN]> {
        let (sess, i) = self.slot_of(key)?;
        if !sess.reliable
            || sess.keys.is_some()
            || status != Status::Ok
            || len > sess.max_message as usize
            || len > sess.frag_size as usize
        {
            return None;
        }
        let slot = &mut sess.slots[i];
        slot.peer.as_ref()?;
        let head = Header::whole_result(sess.token, key.slot, slot.call_no, len as u32).to_bytes();
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
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) -> bool {
        let Some((sess, i)) = self.slot_of(key) else { return false };
        let slot = &mut sess.slots[i];
        slot.result.clear();
        slot.result.extend_from_slice(result);
        self.finish(key, status, out)
    }

    /// How often sessions are swept: a quarter of the shorter idle limit.
    fn sweep_period(&self) -> Duration {
        self.cfg.session_idle.min(self.cfg.unused_idle) / 4
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Drops sessions idle past the limit.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_sweep.is_some_and(|t| now >= t) {
            self.sweep(now);
            self.next_sweep = (self.live > 0).then(|| now + self.sweep_period());
        }
    }

    /// A session that sent anything since the last sweep is stamped with this sweep's time (no
    /// earlier than its last frame); one stamped at least `session_idle` ago goes. So a session
    /// never goes before it has been idle that long, and, with sweeps every quarter of it (as
    /// `poll_timeout` asks), goes within one and a half times that long. A session that has
    /// made no call goes once `unused_idle` has passed since its bind, whatever else it sent.
    /// "Sent anything" means a frame that passed the replay check and changed the session (a
    /// new call, a new fragment, a first acknowledgement): a replayed frame keeps nothing
    /// alive. A session with a call arriving or running is not swept (its client waits).
    fn sweep(&mut self, now: Instant) {
        let (idle, unused) = (self.cfg.session_idle, self.cfg.unused_idle);
        for s in self.sessions.iter_mut() {
            let Some(sess) = s.as_mut() else { continue };
            let active = std::mem::take(&mut sess.active) || sess.busy();
            if active {
                sess.last_active = now;
            }
            let expired = if sess.called() {
                !active && now.saturating_duration_since(sess.last_active) >= idle
            } else {
                now.saturating_duration_since(sess.bound_at) >= unused
            };
            if expired {
                *s = None;
                self.live -= 1;
                self.stats.sessions_expired += 1;
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
                self.stats.sessions_closed += 1;
            }
        }
    }
}

/// Where a bind's session goes.
enum Placed {
    /// The session a retransmission of the same bind already has.
    Existing(usize),
    /// A free entry (perhaps just reclaimed).
    Free(usize),
}

impl<A> Session<A> {
    /// Bytes before a body in each frame: the header, the tag on a keyed session, the sequence
    /// number on a sealed one.
    fn head_len(&self) -> u32 {
        head_len(self.keys.is_some(), self.seal_send.is_some()) as u32
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
    g: &mut Guard<'_>,
    kind: Kind,
    token: u64,
    slot_no: u16,
    slot: &Slot<A>,
    out: &mut impl FnMut(&A, &[u8], &[u8]),
) {
    if let Some(peer) = slot.peer.as_ref() {
        g.emit(base_header(kind, token, slot_no, slot), &[], &mut |hd, b| out(peer, hd, b));
    }
}

fn send_frag_ack<A>(
    g: &mut Guard<'_>,
    token: u64,
    slot_no: u16,
    slot: &Slot<A>,
    out: &mut impl FnMut(&A, &[u8], &[u8]),
) {
    let Some(peer) = slot.peer.as_ref() else { return };
    let (cum, bitmap) = slot.rx.ack_state();
    let mut h = base_header(Kind::FragAck, token, slot_no, slot);
    h.total_len = slot.rx.total();
    h.offset = cum;
    g.emit(h, &bitmap.to_le_bytes(), &mut |hd, b| out(peer, hd, b));
}

fn emit_result_frag<A>(
    g: &mut Guard<'_>,
    token: u64,
    slot_no: u16,
    slot: &Slot<A>,
    i: u32,
    req_ack: bool,
    out: &mut impl FnMut(&A, &[u8], &[u8]),
) {
    let Some(peer) = slot.peer.as_ref() else { return };
    let r = slot.tx.range(i);
    let mut h = base_header(Kind::Result, token, slot_no, slot);
    h.total_len = slot.result.len() as u32;
    h.offset = r.start as u32;
    h.flags = if req_ack { flags::REQ_ACK } else { 0 };
    g.emit(h, &slot.result[r], &mut |hd, b| out(peer, hd, b));
}

/// Sends (or sends again from the start) the slot's finished result.
fn send_result<A>(
    g: &mut Guard<'_>,
    token: u64,
    frag_size: u32,
    window: u16,
    slot_no: u16,
    slot: &mut Slot<A>,
    out: &mut impl FnMut(&A, &[u8], &[u8]),
) {
    match slot.phase {
        Phase::Done(Status::Error(code)) => {
            let Some(peer) = slot.peer.as_ref() else { return };
            // The reason, as much of it as one frame carries.
            let message = ErrorMessage::fit(&slot.result, frag_size as usize);
            let mut h = base_header(Kind::Error, token, slot_no, slot);
            h.proc_or_code = code.to_u32();
            h.total_len = message.as_bytes().len() as u32;
            g.emit(h, message.as_bytes(), &mut |hd, b| out(peer, hd, b));
        }
        Phase::Done(Status::Ok) => {
            slot.tx.reset(slot.result.len() as u32, frag_size, window as u32);
            if let Some(req_ack) = slot.tx.send_single() {
                emit_result_frag(g, token, slot_no, slot, 0, req_ack, out);
                return;
            }
            let mut pending = Burst::new();
            slot.tx.send_new(|i, r| pending.push(i, r));
            for (i, r) in pending.iter() {
                emit_result_frag(g, token, slot_no, slot, i, r, out);
            }
        }
        _ => {}
    }
}
