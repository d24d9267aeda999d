//! The client side: the binding handshake ([`Binder`]) and one call slot ([`ClientSlot`]).
//!
//! A slot carries one call at a time. Its call number increases with every call; a new call
//! acknowledges the previous result (implicit acknowledgement), and an idle slot acknowledges
//! its last result explicitly after a short delay. The client drives every retransmission: the
//! server only answers, so a server needs no timers per call.
//!
//! Contract, as for every engine in this crate: feed frames with `handle`, call `handle_timeout`
//! when `poll_timeout` has passed, and send what the `out` callback is given (a header, 32 bytes
//! or 48 with a keyed session's tag, and a body, to be sent as one frame). Nothing here reads a
//! clock or touches a socket.
//!
//! Binding answers the server's cookie round at once (`BindRetry`: the same request again, with
//! the cookie and, holding a pre-shared key, the proof of it). A keyed session's frames are
//! tagged on the way out and checked on the way in: a frame whose tag fails is ignored and
//! counted (`mac_failures`), as a lost one would be, and the retransmission timers recover.

use core::time::Duration;
use std::time::Instant;

use crate::auth::{self, FrameKeys, Psk, Side};
use crate::frag::{Burst, FragReceiver, FragSender};
use crate::rtt::RttEstimator;
use crate::seal::{head_len, CipherKind, Guard, Opener, SealKeys, Sealer};
use crate::wire::{
    flags, Bind, BindGrant, BindRefusal, BindRequest, ByteOrder, Cookie, ErrorCode, ErrorMessage, Header, Kind,
    PathChallenge, Refusal, WireError, BIND_KEYED, BIND_RELIABLE, BIND_SEALED, BIND_SEAL_AES, HEADER_LEN,
    PROTOCOL_VERSION, TAG_LEN,
};
use crate::MAX_WINDOW;

/// Timing knobs of a client.
#[derive(Clone, Copy, Debug)]
pub struct ClientEngineConfig {
    /// Retransmission timeout before any round trip has been measured.
    pub initial_rto: Duration,
    /// The timeout never drops below this, however fast the round trips.
    pub min_rto: Duration,
    /// Nor grows above this with back-off.
    pub max_rto: Duration,
    /// How long an idle slot waits before acknowledging its last result explicitly.
    pub ack_delay: Duration,
    /// How often to ask about a call the server said is still running.
    pub working_probe: Duration,
}

impl Default for ClientEngineConfig {
    fn default() -> Self {
        ClientEngineConfig {
            initial_rto: Duration::from_millis(20),
            min_rto: Duration::from_millis(1),
            max_rto: Duration::from_secs(1),
            ack_delay: Duration::from_millis(20),
            working_probe: Duration::from_millis(200),
        }
    }
}

/// What the client learnt from binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The token the server granted; every frame of the session carries it.
    pub token: u64,
    /// Call slots granted: calls that may be in flight at once.
    pub slots: u16,
    /// Fragments in flight granted per message.
    pub window: u16,
    /// The order the server's bodies travel in (arguments are encoded in it too).
    pub server_order: ByteOrder,
    /// Largest message, arguments or result, in bytes.
    pub max_message: u32,
    /// Largest frame, header (and tag) included, in bytes.
    pub max_frame: u32,
    /// The server's generation when it granted the session.
    pub generation: u16,
    /// The transport is a reliable stream (TCP, shared memory), as the bind said: nothing is
    /// retransmitted.
    pub reliable: bool,
    /// Frames carry tags under keys from a pre-shared key.
    pub keyed: bool,
    /// Frames after the bind are sealed (encrypted, `crate::seal`).
    pub sealed: bool,
}

impl Session {
    /// Body bytes per fragment (a frame less its header and, keyed, its tag, and sealed, its
    /// sequence number).
    pub fn frag_size(&self) -> u32 {
        self.max_frame - head_len(self.keyed, self.sealed) as u32
    }
}

/// A session the server granted, with its frame keys when it is keyed.
#[derive(Clone, Debug)]
pub struct Bound {
    /// What was granted.
    pub session: Session,
    /// The session's frame keys (`None`: unkeyed).
    pub keys: Option<FrameKeys>,
    /// The session's sealing keys (`None`: not sealed); give them to every slot
    /// ([`ClientSlot::with_seal`]).
    pub seal: Option<SealKeys>,
}

/// Why a binding failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// The server refused the binding, for this reason.
    Refused(Refusal),
    /// No grant or refusal came by the deadline.
    Timeout {
        /// How long the bind was tried.
        after: Duration,
    },
    /// The server's answer made no sense (named field).
    Malformed(&'static str),
    /// Nothing the client could believe came by the deadline, but answers that carried no
    /// valid tag under the client's key did: a server holding another key or none, or someone
    /// on the path. `refusal`: the last such refusal's claim (`None`: only cookie rounds).
    Unauthenticated {
        /// What the last unauthenticated refusal said.
        refusal: Option<Refusal>,
        /// How long the bind was tried.
        after: Duration,
    },
}

/// Cookie rounds a bind goes through before the client gives up: the server asks for one, and
/// again only when the cookie expired on the way (a server that refuses every cookie is broken).
const MAX_COOKIE_ROUNDS: u32 = 4;

/// The binding handshake of one client.
#[derive(Debug)]
pub struct Binder {
    req: BindRequest,
    psk: Option<Psk>,
    cookie: Option<Cookie>,
    cookie_rounds: u32,
    started: Instant,
    deadline: Instant,
    next_at: Option<Instant>,
    retries: u32,
    rtt: RttEstimator,
    seal: Option<CipherKind>,
    /// The last answer whose tag did not verify under the client's key: `Some(None)` a cookie
    /// round, `Some(Some(r))` a refusal.
    unauthenticated: Option<Option<Refusal>>,
    /// Grants, cookie rounds and refusals whose tag did not verify (ignored: a forged or
    /// altered answer, or a server with another key or none).
    pub mac_failures: u64,
}

impl Binder {
    /// A handshake for `req`, retransmitted (on unreliable transports) with the RTO of `cfg`
    /// until `deadline`; call [`start`](Self::start) to send the first bind.
    pub fn new(req: BindRequest, cfg: &ClientEngineConfig, now: Instant, deadline: Instant) -> Binder {
        Binder {
            req,
            psk: None,
            cookie: None,
            cookie_rounds: 0,
            started: now,
            deadline,
            next_at: None,
            retries: 0,
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            seal: None,
            unauthenticated: None,
            mac_failures: 0,
        }
    }

    /// Asks for a sealed session with `cipher` (`None`: not sealed). Needs a key
    /// ([`with_key`](Self::with_key)): the server refuses a sealed bind without one.
    pub fn with_seal(mut self, cipher: Option<CipherKind>) -> Binder {
        self.req.flags &= !(BIND_SEALED | BIND_SEAL_AES);
        if let Some(c) = cipher {
            self.req.flags |= BIND_SEALED | if c == CipherKind::Aes256Gcm { BIND_SEAL_AES } else { 0 };
        }
        self.seal = cipher;
        self
    }

    /// The payload of a cookie round or refusal (past its tag, if it has one), and whether the
    /// client can believe it: without a key, always; under a key, only if it is tagged over this
    /// bind's nonce ([`Psk::bind_answer_tag`]). An answer it cannot believe is noted.
    fn read_answer<'a>(&mut self, frame: &'a [u8], h: &Header, body: &'a [u8]) -> Option<(&'a [u8], bool)> {
        let tagged = h.flags & flags::TAGGED != 0;
        let (tag, payload) = if tagged { body.split_at_checked(TAG_LEN)? } else { (&[][..], body) };
        let believed = match &self.psk {
            None => true,
            Some(psk) => tagged && psk.check_bind_answer(&frame[..HEADER_LEN], payload, self.req.nonce, tag),
        };
        if !believed {
            self.mac_failures += 1;
            self.unauthenticated = Some(match h.kind {
                Kind::BindRefused => BindRefusal::parse(payload).ok().map(|r| r.0),
                _ => None,
            });
        }
        Some((payload, believed))
    }

    /// Binds with a pre-shared key (`None`: without one).
    pub fn with_key(mut self, psk: Option<Psk>) -> Binder {
        self.req.flags &= !BIND_KEYED;
        if psk.is_some() {
            self.req.flags |= BIND_KEYED;
        }
        self.psk = psk;
        self
    }

    fn send(&self, out: &mut impl FnMut(&[u8], &[u8])) {
        let mut h = Header::new(Kind::Bind);
        h.call_no = self.req.nonce as u32;
        h.version = PROTOCOL_VERSION;
        let mut body = [0u8; Bind::MAX_LEN];
        let mut n = Bind { request: self.req, cookie: self.cookie, proof: None }.emit(&mut body);
        if let (Some(psk), Some(cookie)) = (&self.psk, &self.cookie) {
            // Over the request as sent (its flags say a cookie follows).
            let proof = psk.prove(&body[..BindRequest::LEN], cookie);
            body[n..n + TAG_LEN].copy_from_slice(&proof);
            n += TAG_LEN;
        }
        if self.psk.is_some() {
            // Padded (with zeros the server does not read) to the longest bind, as QUIC pads its
            // Initial: the server answers an unproven address with no more than it sent, and its
            // tagged cookie round is longer than a bare request.
            n = Bind::MAX_LEN;
        }
        out(&h.to_bytes(), &body[..n]);
    }

    /// Sends the first bind at `now` (and arms its retransmission on an unreliable transport).
    pub fn start(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) {
        self.send(out);
        if self.req.flags & BIND_RELIABLE == 0 {
            self.next_at = Some(now + self.rtt.rto());
        }
    }

    /// Feeds a frame that arrived at `now`; returns the outcome once the server has answered
    /// this bind. A cookie round is answered at once through `out`.
    pub fn handle(
        &mut self,
        frame: &[u8],
        now: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Result<Bound, BindError>> {
        let (h, body) = Header::parse(frame).ok()?;
        if h.call_no != self.req.nonce as u32 {
            return None;
        }
        match h.kind {
            Kind::BindRetry => {
                // A copy of a round already answered, or anything that is no cookie: ignored
                // (the retransmission timer stands). Under a key a cookie round the client
                // cannot verify (another key's server, or a forgery) is still answered: a
                // cookie grants nothing, the server checks it, and so a server with another
                // key gets the proof and says so in its counters (`bad_key`). Only verified
                // rounds count towards the limit, so forgeries cannot exhaust it.
                let (payload, believed) = self.read_answer(frame, &h, body)?;
                let cookie = Cookie::parse(payload).ok()?;
                if self.cookie == Some(cookie) {
                    return None;
                }
                self.cookie_rounds += u32::from(believed);
                if self.cookie_rounds > MAX_COOKIE_ROUNDS {
                    return Some(Err(BindError::Malformed("cookie (the server refused every one it gave)")));
                }
                self.cookie = Some(cookie);
                self.send(out);
                if self.next_at.is_some() {
                    self.next_at = Some(now + self.rtt.rto());
                }
                None
            }
            Kind::BindOk => {
                let mut keys = None;
                let mut body = body;
                if let Some(psk) = &self.psk {
                    let server_nonce = self.cookie.map_or([0; TAG_LEN], |c| c.mac);
                    let k = psk.session_keys(self.req.nonce, &server_nonce, h.token, Side::Client);
                    // Only a server with the key can tag the grant: anything else is ignored.
                    let Some(b) = auth::open(&k.recv, frame, body) else {
                        self.mac_failures += 1;
                        return None;
                    };
                    body = b;
                    keys = Some(k);
                }
                let g = match BindGrant::parse(body) {
                    Ok(g) => g,
                    Err(_) => return Some(Err(BindError::Malformed("bind grant"))),
                };
                if g.slots == 0 || g.slots > self.req.slots.max(1) {
                    return Some(Err(BindError::Malformed("slots granted")));
                }
                if g.max_frame as usize <= HEADER_LEN + TAG_LEN || g.max_frame > self.req.max_frame {
                    return Some(Err(BindError::Malformed("frame size granted")));
                }
                if g.window < 2 || g.window > MAX_WINDOW {
                    return Some(Err(BindError::Malformed("window granted")));
                }
                if g.sealed != self.seal.is_some() {
                    return Some(Err(BindError::Malformed("sealing granted (not as asked)")));
                }
                let seal = match (&self.psk, self.seal) {
                    (Some(psk), Some(kind)) => {
                        let server_nonce = self.cookie.map_or([0; TAG_LEN], |c| c.mac);
                        Some(SealKeys::new(kind, &psk.seal_keys(self.req.nonce, &server_nonce, h.token, Side::Client)))
                    }
                    _ => None,
                };
                let session = Session {
                    token: h.token,
                    slots: g.slots,
                    window: g.window,
                    server_order: g.byte_order,
                    max_message: g.max_message.min(self.req.max_message),
                    max_frame: g.max_frame,
                    generation: g.generation,
                    reliable: self.req.flags & BIND_RELIABLE != 0,
                    keyed: keys.is_some(),
                    sealed: seal.is_some(),
                };
                Some(Ok(Bound { session, keys, seal }))
            }
            Kind::BindRefused => {
                // Under a key an unauthenticated refusal is noted, not believed: the bind goes
                // on until its deadline.
                let (payload, believed) = self.read_answer(frame, &h, body)?;
                if !believed {
                    return None;
                }
                Some(match BindRefusal::parse(payload) {
                    Ok(r) => Err(BindError::Refused(r.0)),
                    Err(_) => Err(BindError::Malformed("bind refusal")),
                })
            }
            _ => None,
        }
    }

    /// [`BindError::Unauthenticated`] if answers this client could not verify have come (for a
    /// caller whose channel failed before the deadline: a stream the server closed).
    pub fn unauthenticated(&self, now: Instant) -> Option<BindError> {
        self.unauthenticated.map(|refusal| BindError::Unauthenticated { refusal, after: now - self.started })
    }

    /// When [`handle_timeout`](Self::handle_timeout) wants to be called: the next retransmission
    /// or the deadline. Never `None`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        Some(self.next_at.map_or(self.deadline, |t| t.min(self.deadline)))
    }

    /// Retransmits the bind if due at `now`; `Some` once the deadline has passed: the binding
    /// failed.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) -> Option<BindError> {
        if now >= self.deadline {
            return Some(self.unauthenticated(now).unwrap_or(BindError::Timeout { after: now - self.started }));
        }
        if let Some(t) = self.next_at {
            if now >= t {
                self.retries += 1;
                self.send(out);
                self.next_at = Some(now + self.rtt.backed_off(self.retries));
            }
        }
        None
    }
}

/// What is known, when a call fails, about whether the procedure ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// Nothing of the call left the client.
    NotSent,
    /// The call was sent but nothing came back: it may or may not have run.
    Unknown,
    /// The server acknowledged the call (it may have finished running).
    Started,
}

impl core::fmt::Display for Execution {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Execution::NotSent => "the call was never sent, so it did not execute",
            Execution::Unknown => "the server never answered, so the call may or may not have executed",
            Execution::Started => "the server had received the call, so it may have executed",
        })
    }
}

/// Why a call failed in the engine (the server's own errors are [`Outcome::Remote`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The per-call deadline passed.
    Timeout {
        /// How long the call waited.
        after: Duration,
        /// Whether the procedure may have run.
        execution: Execution,
    },
    /// The server does not know the session. `restarted`: its generation changed.
    /// `retry_safe`: the call was refused on its first transmission by the same server
    /// incarnation, so it never ran and may be sent again on a new session.
    SessionLost {
        /// The server restarted (its generation changed) rather than expiring the session.
        restarted: bool,
        /// The call never ran and may be sent again on a new session.
        retry_safe: bool,
    },
    /// The arguments exceed the session's maximum message size.
    TooLarge {
        /// Bytes of the arguments.
        size: usize,
        /// The session's maximum message, in bytes.
        max: u32,
    },
}

/// The result of feeding a frame to a busy slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// The call completed; the result body (in the frame where it lies, or reassembled).
    Reply(&'a [u8]),
    /// The call failed.
    Failed(CallError),
    /// The server answered with an error, and why in its own words (`Ok("")` when it gave no
    /// reason; an `Err` when the reason it sent was malformed: too long, or not UTF-8).
    Remote {
        /// The server's code.
        code: ErrorCode,
        /// The server's reason, checked.
        message: Result<&'a str, WireError>,
    },
}

/// One call slot of a bound client: its [`SlotState`], and on a sealed session what opens the
/// frames it receives. (The opened plaintext lies in the opener while the state, a field apart,
/// reads it: so `handle` can return a result that borrows it.)
#[derive(Debug)]
pub struct ClientSlot {
    state: SlotState,
    opener: Option<Opener>,
}

impl core::ops::Deref for ClientSlot {
    type Target = SlotState;
    fn deref(&self) -> &SlotState {
        &self.state
    }
}

impl core::ops::DerefMut for ClientSlot {
    fn deref_mut(&mut self) -> &mut SlotState {
        &mut self.state
    }
}

/// Everything of a call slot but the opener of sealed frames: the calls' state, timers and
/// counters. Reached through [`ClientSlot`].
#[derive(Debug)]
pub struct SlotState {
    session: Session,
    keys: Option<FrameKeys>,
    /// On a sealed session: seals what this slot sends (its counter shared by the session's slots).
    sealer: Option<Sealer>,
    cfg: ClientEngineConfig,
    template: Header,
    rtt: RttEstimator,
    args: Vec<u8>,
    /// The current call's arguments were written where they are read, not into `args`
    /// ([`place_call`](ClientSlot::place_call)).
    placed: bool,
    tx: FragSender,
    rx: FragReceiver,
    rx_started: bool,
    active: bool,
    started: Instant,
    deadline: Instant,
    rto_at: Option<Instant>,
    retries: u32,
    heard: bool,
    working: bool,
    ack_due: Option<Instant>,
    /// Frames that made no sense for this slot (stale, malformed); for diagnostics.
    pub ignored: u64,
    /// Retransmissions sent (fragments, probes and stalled acknowledgements).
    pub retransmissions: u64,
    /// Frames of this slot's calls whose tag was missing or wrong (ignored).
    pub mac_failures: u64,
    /// Calls sent.
    pub calls: u64,
    /// Path challenges answered (the server saw this slot from a new address).
    pub challenges_answered: u64,
}

impl ClientSlot {
    /// The slot `slot` of `session`, idle, with `cfg`'s timers (unkeyed: see
    /// [`with_keys`](Self::with_keys)).
    pub fn new(session: Session, slot: u16, cfg: ClientEngineConfig) -> ClientSlot {
        let mut template = Header::new(Kind::Call);
        template.slot = slot;
        template.token = session.token;
        let now = Instant::now();
        let state = SlotState {
            session,
            keys: None,
            sealer: None,
            cfg,
            template,
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            args: Vec::new(),
            placed: false,
            tx: FragSender::default(),
            rx: FragReceiver::default(),
            rx_started: false,
            active: false,
            started: now,
            deadline: now,
            rto_at: None,
            retries: 0,
            heard: false,
            working: false,
            ack_due: None,
            ignored: 0,
            retransmissions: 0,
            mac_failures: 0,
            calls: 0,
            challenges_answered: 0,
        };
        ClientSlot { state, opener: None }
    }

    /// The slot of a keyed session, with the keys the bind gave (`None`: unkeyed).
    pub fn with_keys(mut self, keys: Option<FrameKeys>) -> ClientSlot {
        self.state.session.keyed = keys.is_some();
        self.state.keys = keys;
        self
    }

    /// The slot of a sealed session, with the keys the bind gave ([`Bound::seal`]; `None`: not
    /// sealed). The sealer's counter is the session's, shared with its other slots.
    pub fn with_seal(mut self, seal: Option<SealKeys>) -> ClientSlot {
        self.state.session.sealed = seal.is_some();
        let (sealer, opener) = seal.map(|s| (s.send, s.recv)).unzip();
        self.state.sealer = sealer;
        self.opener = opener;
        self
    }

    /// Feeds one received frame, which arrived at `now()`: asked only on an unreliable
    /// session, whose timers (retransmission, acknowledgement) use the time; a reliable one's
    /// only timer is the deadline, so a reply there costs no clock read (~30 ns in a VM).
    ///
    /// A [`Kind::PathChallenge`] from the server (it heard this slot from an address the
    /// session had not proven: the client's address changed) is answered at once, and the
    /// call in flight sent again, so that the call completes a round trip later.
    pub fn handle<'a>(
        &'a mut self,
        frame: &'a [u8],
        now: impl FnOnce() -> Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Outcome<'a>> {
        let Ok((h, body)) = Header::parse(frame) else {
            self.state.ignored += 1;
            return None;
        };
        let (body, opened) = if h.flags & flags::SEALED == 0 {
            (body, false)
        } else {
            match self.opener.as_mut().and_then(|o| o.open(frame)) {
                Some(b) => (b, true),
                None => {
                    self.state.ignored += 1;
                    self.state.mac_failures += 1;
                    return None;
                }
            }
        };
        self.state.handle_opened(h, frame, body, opened, now, out)
    }
}

impl SlotState {
    /// The session this slot belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// This slot's index in the session.
    pub fn slot(&self) -> u16 {
        self.template.slot
    }

    /// The number of the current (or last) call.
    pub fn call_no(&self) -> u32 {
        self.template.call_no
    }

    /// A call is in flight on this slot: started, and neither completed nor failed yet.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The smoothed round trip measured on this slot.
    pub fn smoothed_rtt(&self) -> Option<Duration> {
        self.rtt.smoothed()
    }

    /// The buffer to encode the next call's arguments into (emptied; capacity kept).
    pub fn args_buf(&mut self) -> &mut Vec<u8> {
        self.args.clear();
        &mut self.args
    }

    /// The arguments of the current (or last) call, for sending it again; `None` when they were
    /// written in place ([`place_call`](Self::place_call)) and not kept here.
    pub fn args(&self) -> Option<&[u8]> {
        (!self.placed).then_some(&self.args[..])
    }

    /// Whether the current call goes (went) as one frame without the fragment sender: over a
    /// reliable session, whose fragments are as large as its messages.
    fn sent_whole(&self) -> bool {
        self.session.reliable && self.template.total_len <= self.session.frag_size()
    }

    fn guard(&mut self) -> Guard<'_> {
        Guard::of(self.keys.as_ref().map(|k| &k.send), self.sealer.as_mut())
    }

    /// Answers a path challenge from the server, then sends the call in flight again at once
    /// (the server answered it with nothing but the challenge).
    fn answer_challenge(&mut self, h: &Header, out: &mut impl FnMut(&[u8], &[u8])) {
        self.challenges_answered += 1;
        let response = PathChallenge::read(h).header(Kind::PathResponse, self.session.token, self.template.slot);
        self.guard().emit(response, &[], out);
        if self.active && !self.session.reliable {
            self.retransmissions += 1;
            self.resend(out);
        }
    }

    /// Sends again what the server has not acknowledged of the call in flight: fragments,
    /// a probe for a call sent whole, or a stalled acknowledgement of a result half received.
    fn resend(&mut self, out: &mut impl FnMut(&[u8], &[u8])) {
        if self.rx_started {
            self.send_frag_ack(flags::STALLED | flags::RETRANSMIT, out);
        } else if self.tx.is_complete() {
            self.send_control(Kind::Probe, flags::RETRANSMIT, &[], out);
        } else {
            let mut pending = Burst::new();
            self.tx.resend_unacked(|i, r| pending.push(i, r));
            // A lost tail of a burst shows up as a full collection: ask for an ack on the last.
            pending.req_ack_on_last();
            self.emit_pending(&pending, out);
        }
    }

    fn emit_frag(&mut self, i: u32, req_ack: bool, retransmit: bool, out: &mut impl FnMut(&[u8], &[u8])) {
        let r = self.tx.range(i);
        let mut h = self.template;
        h.offset = r.start as u32;
        h.flags = if req_ack { flags::REQ_ACK } else { 0 } | if retransmit { flags::RETRANSMIT } else { 0 };
        Guard::of(self.keys.as_ref().map(|k| &k.send), self.sealer.as_mut()).emit(h, &self.args[r], out);
    }

    fn send_control(&mut self, kind: Kind, fl: u8, body: &[u8], out: &mut impl FnMut(&[u8], &[u8])) {
        let mut h = self.template;
        h.kind = kind;
        h.flags = fl;
        h.total_len = body.len() as u32;
        h.offset = 0;
        self.guard().emit(h, body, out);
    }

    /// Sends the call whose arguments are in [`args_buf`](Self::args_buf), begun at `now`, to
    /// fail at `deadline`.
    pub fn start(
        &mut self,
        proc_no: u32,
        now: Instant,
        deadline: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(), CallError> {
        self.send_call(proc_no, out)?;
        self.time_call(now, deadline);
        Ok(())
    }

    /// [`start`](Self::start) in two halves, for a caller over a reliable session that reads the
    /// clock while the call travels instead of before sending it (off the critical path): sends
    /// the call; [`time_call`](Self::time_call) must follow before anything else is fed in,
    /// except over a reliable session, where nothing is timed but the deadline: there frames may
    /// come first (a reply that arrives before the caller has read the clock spares it the
    /// read), and `time_call` need only precede [`poll_timeout`](Self::poll_timeout) and
    /// [`handle_timeout`](Self::handle_timeout).
    pub fn send_call(&mut self, proc_no: u32, out: &mut impl FnMut(&[u8], &[u8])) -> Result<(), CallError> {
        if self.args.len() > self.session.max_message as usize {
            return Err(CallError::TooLarge { size: self.args.len(), max: self.session.max_message });
        }
        self.begin(proc_no, self.args.len() as u32);
        self.placed = false;
        if self.sent_whole() {
            // A reliable session's fragment is as large as its messages: the call goes in one
            // frame, as the fragment sender would send it, without setting the sender up
            // (nothing is retransmitted or acknowledged by fragment on such a session).
            let t = &self.template;
            let h = Header::whole_call(t.token, t.slot, t.call_no, proc_no, self.args.len() as u32);
            Guard::of(self.keys.as_ref().map(|k| &k.send), self.sealer.as_mut()).emit(h, &self.args, out);
            return Ok(());
        }
        self.tx.reset(self.args.len() as u32, self.session.frag_size(), self.session.window as u32);
        if let Some(req_ack) = self.tx.send_single() {
            self.emit_frag(0, req_ack, false, out);
            return Ok(());
        }
        // The window is at most 64 fragments (enforced at bind), so one burst fits here.
        // Collect first, then emit: `send_new` borrows the sender, emitting borrows the args.
        let mut burst = Burst::new();
        self.tx.send_new(|i, r| burst.push(i, r));
        for (i, r) in burst.iter() {
            self.emit_frag(i, r, false, out);
        }
        Ok(())
    }

    /// [`send_call`](Self::send_call) for arguments already written where the server will read
    /// them, `len` bytes after room for the header (a shared-memory call ring's record, so
    /// that they are written once): returns the header to write before them, which makes the
    /// frame complete. Only a call that goes as one untagged frame can go so (a reliable,
    /// unkeyed session, the arguments within its limits); for any other, `None` and nothing
    /// changed: put the arguments in [`args_buf`](Self::args_buf) and `send_call`. The
    /// arguments are not kept ([`args`](Self::args) is `None`): a call sent again after a
    /// rebind needs them from where they were written.
    pub fn place_call(&mut self, proc_no: u32, len: usize) -> Option<[u8; HEADER_LEN]> {
        let fits = len <= self.session.max_message as usize && len <= self.session.frag_size() as usize;
        if !self.session.reliable || self.keys.is_some() || !fits {
            return None;
        }
        self.begin(proc_no, len as u32);
        self.args.clear();
        self.placed = true;
        let t = &self.template;
        Some(Header::whole_call(t.token, t.slot, t.call_no, proc_no, len as u32).to_bytes())
    }

    /// The state of a new call of `proc_no` with `len` bytes of arguments, not yet sent.
    fn begin(&mut self, proc_no: u32, len: u32) {
        assert!(!self.active, "a slot carries one call at a time");
        self.template.kind = Kind::Call;
        self.template.call_no = self.template.call_no.wrapping_add(1);
        self.template.proc_or_code = proc_no;
        self.template.total_len = len;
        self.calls += 1;
        self.ack_due = None; // this call acknowledges the previous result
        self.rx_started = false;
        self.active = true;
        self.retries = 0;
        self.heard = false;
        self.working = false;
    }

    /// Starts the clock of the call just sent: it began at `now` and fails at `deadline`.
    pub fn time_call(&mut self, now: Instant, deadline: Instant) {
        self.started = now;
        self.deadline = deadline;
        self.rto_at = if self.session.reliable { None } else { Some(now + self.rtt.rto()) };
    }

    /// Gives up the call in flight without an outcome from the engine: the caller's channel
    /// failed (connection lost, peer dead) and it reports the failure itself. The slot is free
    /// for the next call, whose new call number makes anything still coming for this one stale;
    /// nothing of it is acknowledged or retransmitted.
    pub fn abandon(&mut self) {
        self.active = false;
        self.rto_at = None;
        self.ack_due = None;
    }

    fn finish(&mut self, now: Instant) {
        self.active = false;
        self.rto_at = None;
        if !self.session.reliable {
            self.ack_due = Some(now + self.cfg.ack_delay);
        }
    }

    fn emit_pending(&mut self, pending: &Burst, out: &mut impl FnMut(&[u8], &[u8])) {
        for (i, r) in pending.iter() {
            self.emit_frag(i, r, true, out);
        }
    }

    /// [`ClientSlot::handle`] once a sealed frame is open (`opened`: `body` is its plaintext).
    fn handle_opened<'a>(
        &'a mut self,
        h: Header,
        frame: &'a [u8],
        body: &'a [u8],
        opened: bool,
        now: impl FnOnce() -> Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Outcome<'a>> {
        // On a reliable session no use of `now` below reaches a timer; the call's start will do.
        let now = if self.session.reliable { self.started } else { now() };
        // Cheap checks before the MAC: a frame for no call in flight is dropped unverified, as
        // before; only a path challenge concerns an idle slot too.
        let current = self.active && h.call_no == self.template.call_no;
        if h.token != self.session.token || h.slot != self.template.slot || !(current || h.kind == Kind::PathChallenge)
        {
            self.ignored += 1;
            return None;
        }
        let body = match &self.keys {
            // An unkeyed slot has no opener: `opened` is false there.
            None => body,
            Some(_) if opened => body,
            Some(k) => {
                // The server tags a session it does not know under the key's own; a sealed
                // session takes nothing else unsealed.
                let unknown = h.kind == Kind::Error && ErrorCode::from_u32(h.proc_or_code) == ErrorCode::UnknownSession;
                let verified = if unknown {
                    auth::open(&k.unbound, frame, body)
                } else if self.sealer.is_some() {
                    None
                } else {
                    auth::open(&k.recv, frame, body)
                };
                match verified {
                    Some(b) => b,
                    None => {
                        self.ignored += 1;
                        self.mac_failures += 1;
                        return None;
                    }
                }
            }
        };
        if h.kind == Kind::PathChallenge {
            self.answer_challenge(&h, out);
            return None;
        }
        match h.kind {
            Kind::Result => {
                self.heard = true;
                self.tx.mark_all_acked();
                if h.offset == 0 && body.len() == h.total_len as usize && !self.rx_started {
                    // Over a reliable session no timer uses the round trip: nothing to learn.
                    if self.retries == 0 && !self.working && !self.session.reliable {
                        self.rtt.sample(now.saturating_duration_since(self.started));
                    }
                    self.finish(now);
                    return Some(Outcome::Reply(body));
                }
                if h.total_len > self.session.max_message {
                    self.ignored += 1;
                    return None;
                }
                if !self.rx_started {
                    self.rx.reset(h.total_len, self.session.frag_size());
                    self.rx_started = true;
                }
                if self.rx.accept(h.total_len, h.offset, body).is_err() {
                    self.ignored += 1;
                    return None;
                }
                if self.rx.is_complete() {
                    self.finish(now);
                    return Some(Outcome::Reply(self.rx.message()));
                }
                self.retries = 0;
                self.rto_at = self.rto_at.map(|_| now + self.rtt.rto());
                if h.flags & flags::REQ_ACK != 0 {
                    self.send_frag_ack(0, out);
                }
                None
            }
            Kind::Error => {
                let code = ErrorCode::from_u32(h.proc_or_code);
                let outcome = if code == ErrorCode::UnknownSession {
                    let restarted = h.offset as u16 != self.session.generation;
                    // Refused on its first transmission, the call never ran here. Nor did it
                    // run on an earlier incarnation of the server: over a reliable session
                    // the connection it went on was opened to this one; over datagrams only if
                    // the server was the same one throughout.
                    let retry_safe = self.retries == 0 && (!restarted || self.session.reliable);
                    Outcome::Failed(CallError::SessionLost { restarted, retry_safe })
                } else {
                    Outcome::Remote { code, message: ErrorMessage::parse(body).map(|m| m.0) }
                };
                self.finish(now);
                self.ack_due = None; // errors are not kept for acknowledgement on the server
                Some(outcome)
            }
            Kind::Working => {
                self.heard = true;
                self.working = true;
                self.tx.mark_all_acked();
                self.retries = 0;
                if self.rto_at.is_some() {
                    self.rto_at = Some((now + self.cfg.working_probe.max(self.rtt.rto())).min(self.deadline));
                }
                None
            }
            // Only for a call that went in fragments: over a reliable session a call that fits
            // one frame goes without the fragment sender (see `send_call`), so there is nothing
            // to acknowledge.
            Kind::FragAck if !self.rx_started && !self.sent_whole() => {
                let Some(bits) = body.get(..8) else {
                    self.ignored += 1;
                    return None;
                };
                self.heard = true;
                let bitmap = u64::from_le_bytes(bits.try_into().unwrap_or([0; 8]));
                let mut pending = Burst::new();
                self.tx.on_ack(h.offset, bitmap, h.flags & flags::STALLED != 0, |i, r| pending.push(i, r));
                self.emit_pending(&pending, out);
                self.retries = 0;
                if self.rto_at.is_some() {
                    self.rto_at = Some(now + self.rtt.rto());
                }
                None
            }
            _ => {
                self.ignored += 1;
                None
            }
        }
    }

    /// The fast path of a reliable session's reply: the result body, if `frame` is the current
    /// call's whole result with exactly the header the server sends for one
    /// ([`Header::whole_result`]); the call is then complete. Compared byte for byte, not
    /// decoded: over shared memory this is most of what a reply costs the client. `None` for
    /// anything else (and on an unreliable session): give the frame to [`handle`](ClientSlot::handle),
    /// which treats every case.
    #[inline]
    pub fn take_whole_result<'a>(&mut self, frame: &'a [u8]) -> Option<&'a [u8]> {
        if !self.session.reliable || self.keys.is_some() || !self.active || self.rx_started || !self.sent_whole() {
            return None;
        }
        let (head, body) = frame.split_first_chunk::<HEADER_LEN>()?;
        let len = u32::try_from(body.len()).ok()?;
        let expected = Header::whole_result(self.session.token, self.template.slot, self.template.call_no, len);
        if !expected.matches(head) {
            return None;
        }
        self.heard = true;
        // As `handle` does on a reliable session, where no timer uses the time.
        self.finish(self.started);
        Some(body)
    }

    fn send_frag_ack(&mut self, fl: u8, out: &mut impl FnMut(&[u8], &[u8])) {
        let (cum, bitmap) = self.rx.ack_state();
        let mut h = self.template;
        h.kind = Kind::FragAck;
        h.flags = fl;
        h.total_len = self.rx.total();
        h.offset = cum;
        self.guard().emit(h, &bitmap.to_le_bytes(), out);
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.active {
            Some(self.rto_at.map_or(self.deadline, |t| t.min(self.deadline)))
        } else {
            self.ack_due
        }
    }

    /// Runs timers: retransmission, deadline, delayed acknowledgement.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) -> Option<CallError> {
        if !self.active {
            if self.ack_due.is_some_and(|t| now >= t) {
                self.ack_due = None;
                self.send_control(Kind::Ack, 0, &[], out);
            }
            return None;
        }
        if now >= self.deadline {
            self.active = false;
            self.rto_at = None;
            let execution = if self.heard { Execution::Started } else { Execution::Unknown };
            return Some(CallError::Timeout { after: now - self.started, execution });
        }
        let t = self.rto_at?;
        if now < t {
            return None;
        }
        self.retries += 1;
        self.retransmissions += 1;
        self.resend(out);
        let next = if self.working {
            self.cfg.working_probe.max(self.rtt.backed_off(self.retries))
        } else {
            self.rtt.backed_off(self.retries)
        };
        self.rto_at = Some((now + next).min(self.deadline));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reliable_slot() -> ClientSlot {
        let session = Session {
            token: 0x1234_5678_9abc,
            slots: 1,
            window: 2,
            server_order: ByteOrder::native(),
            max_message: 1 << 20,
            max_frame: u32::MAX,
            generation: 1,
            reliable: true,
            keyed: false,
            sealed: false,
        };
        ClientSlot::new(session, 0, ClientEngineConfig::default())
    }

    /// The server's answer to the call whose header is `call`.
    fn result_for(call: &[u8], body: &[u8]) -> Vec<u8> {
        let (mut h, _) = Header::parse(call).unwrap();
        h.kind = Kind::Result;
        h.flags = 0;
        h.total_len = body.len() as u32;
        h.offset = 0;
        [&h.to_bytes()[..], body].concat()
    }

    /// A reliable session's call goes in one frame only when it fits one; one that does not goes
    /// in fragments, and the fragment acknowledgements it then gets move its window on.
    #[test]
    fn a_fragmented_call_on_a_reliable_session_follows_its_acknowledgements() {
        let mut slot = reliable_slot();
        slot.session.max_frame = HEADER_LEN as u32 + 100;
        slot.args_buf().extend_from_slice(&[7u8; 1000]);
        let mut sent: Vec<Vec<u8>> = Vec::new();
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        assert_eq!(sent.len(), 2, "the first window of 100-byte fragments");
        let mut ack = Header::parse(&sent[0]).unwrap().0;
        ack.kind = Kind::FragAck;
        ack.flags = 0;
        ack.offset = 2; // both received
        let ack = [&ack.to_bytes()[..], &0u64.to_le_bytes()].concat();
        assert_eq!(slot.handle(&ack, Instant::now, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())), None);
        let offsets: Vec<u32> = sent.iter().map(|f| Header::parse(f).unwrap().0.offset).collect();
        assert_eq!(offsets, [0, 100, 200, 300], "the acknowledgement let the next window go");
    }

    /// A call whose arguments were written where they are read gets the very header `send_call`
    /// would have sent whole, completes as any other, and keeps no copy of its arguments; a call
    /// that cannot go as one untagged frame is declined with nothing changed.
    #[test]
    fn a_placed_call_is_sent_as_send_call_would_send_it() {
        let mut slot = reliable_slot();
        let mut sent: Vec<Vec<u8>> = Vec::new();
        slot.args_buf().extend_from_slice(b"args");
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        assert_eq!(slot.args(), Some(&b"args"[..]));
        // The server's answer to a call sent whole.
        let whole_result = |call: &[u8], body: &[u8]| {
            let (h, _) = Header::parse(call).unwrap();
            [&Header::whole_result(h.token, h.slot, h.call_no, body.len() as u32).to_bytes()[..], body].concat()
        };
        assert_eq!(slot.take_whole_result(&whole_result(&sent[0], b"r")), Some(&b"r"[..]));

        let head = slot.place_call(3, 4).expect("a reliable session's small call goes whole");
        let frame = [&head[..], b"args"].concat();
        let (h, body) = Header::parse(&frame).unwrap();
        assert_eq!((h.kind, h.call_no, h.proc_or_code, h.total_len, body), (Kind::Call, 2, 3, 4, &b"args"[..]));
        assert_eq!(head, Header::whole_call(h.token, 0, 2, 3, 4).to_bytes());
        assert!(slot.is_active());
        assert_eq!(slot.args(), None, "written in place, not kept");
        assert_eq!(slot.take_whole_result(&whole_result(&frame, b"done")), Some(&b"done"[..]));
        assert!(!slot.is_active());

        // Larger than a fragment, or than a message; keyed; over datagrams: declined, no call
        // begun.
        slot.session.max_frame = HEADER_LEN as u32 + 100;
        assert_eq!(slot.place_call(3, 101), None);
        slot.session.max_frame = u32::MAX;
        assert_eq!(slot.place_call(3, (1 << 20) + 1), None);
        let mut datagrams = reliable_slot();
        datagrams.session.reliable = false;
        assert_eq!(datagrams.place_call(3, 4), None);
        let keys = crate::auth::Psk::new(&[1; 32]).unwrap().session_keys(1, &[2; TAG_LEN], 3, Side::Client);
        let mut keyed = reliable_slot().with_keys(Some(keys));
        assert_eq!(keyed.place_call(3, 4), None);
        assert!(!slot.is_active() && !datagrams.is_active() && !keyed.is_active());
        assert_eq!(slot.call_no(), 2, "nothing begun");
    }

    /// Over a reliable session the caller may feed the reply before telling the engine when the
    /// call began (it reads the clock only if the reply is slow): the call completes, and a
    /// later call still fails at the deadline it is given.
    #[test]
    fn reliable_reply_before_time_call_completes_the_call() {
        let mut slot = reliable_slot();
        let mut sent: Vec<Vec<u8>> = Vec::new();
        slot.args_buf().extend_from_slice(b"args");
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        // One frame, as the fragment sender would have sent it.
        let (h, body) = Header::parse(&sent[0]).unwrap();
        assert_eq!((h.kind, h.proc_or_code, h.total_len, h.offset, h.flags), (Kind::Call, 3, 4, 0, flags::REQ_ACK));
        assert_eq!(body, b"args");
        let reply = result_for(&sent[0], b"result");
        let nothing_sent = &mut |_: &[u8], _: &[u8]| panic!("the engine sent something");
        let t0 = Instant::now();
        // A fragment acknowledgement makes no sense on a reliable session: ignored, nothing
        // resent.
        let mut ack = Header::parse(&sent[0]).unwrap().0;
        ack.kind = Kind::FragAck;
        ack.offset = 7;
        let ack = [&ack.to_bytes()[..], &u64::MAX.to_le_bytes()].concat();
        assert_eq!(slot.handle(&ack, || t0, nothing_sent), None);
        assert!(slot.is_active());
        assert_eq!(slot.handle(&reply, || t0, nothing_sent), Some(Outcome::Reply(&b"result"[..])));
        assert!(!slot.is_active());
        assert_eq!(slot.poll_timeout(), None, "a reliable session keeps no acknowledgement timer");
        // Fed again, the same reply is stale.
        assert_eq!(slot.handle(&reply, || t0, nothing_sent), None);

        slot.args_buf().clear();
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        let deadline = t0 + Duration::from_millis(10);
        slot.time_call(t0, deadline);
        assert_eq!(slot.poll_timeout(), Some(deadline), "no retransmission timer before the deadline");
        assert_eq!(slot.handle_timeout(deadline - Duration::from_millis(1), nothing_sent), None);
        match slot.handle_timeout(deadline, nothing_sent) {
            Some(CallError::Timeout { after, execution: Execution::Unknown }) => {
                assert_eq!(after, Duration::from_millis(10))
            }
            other => panic!("{other:?}"),
        }
        // The first call's reply, arriving now, does not complete anything.
        assert_eq!(slot.handle(&reply, || deadline, nothing_sent), None);
    }
}
