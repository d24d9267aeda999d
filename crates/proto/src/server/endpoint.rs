//! The server's endpoint, quinn's `Endpoint` to the sessions' `Connection`: what is decided
//! before a session exists or for all sessions at once. It checks binds (stateless refusals
//! first), sends the cookie rounds that make a client prove it receives at its address, checks
//! the proof of a pre-shared key, makes sessions (their tokens and keys) where the table finds
//! room within each source's cap, answers frames for sessions it does not know, and sweeps idle
//! sessions on its one timer.
//!
//! Nobody gets state before proving they receive at their address: until a cookie comes back,
//! no answer is larger than the frame it answers.

use core::hash::Hash;
use core::time::Duration;
use std::time::Instant;

use super::config::ServerEngineConfig;
use super::connection::{Session, Slot, Terms};
use super::sessions::{Placed, SessionTable};
use super::shard::Shard;
use super::stats::ServerStats;
use crate::auth::{Psk, ServerSecret, Side, Tag};
use crate::seal::{head_len, CipherKind, Guard, SealKeys, SEALED_HEAD_LEN};
use crate::wire::{
    flags, token, Bind, BindGrant, BindRefusal, BindRequest, ByteOrder, ErrorCode, Header, Kind, Refusal, BIND_KEYED,
    BIND_SEALED, BIND_SEAL_AES, HEADER_LEN, PROTOCOL_VERSION, TAG_LEN,
};
use crate::MAX_WINDOW;

/// The callback a server engine sends frames through: (peer, header, body). The header is 32
/// bytes, or 48 with the tag of a keyed session.
type SendTo<'a, A> = dyn FnMut(&A, &[u8], &[u8]) + 'a;

/// Everything of the server that is not one session's.
#[derive(Debug)]
pub(super) struct Endpoint<A> {
    pub(super) cfg: ServerEngineConfig,
    pub(super) generation: u16,
    /// Cookie keys, path challenges and the random bits of tokens.
    pub(super) secret: ServerSecret,
    /// Session tokens made so far (numbers the random bits of the next).
    tokens: u64,
    next_sweep: Option<Instant>,
    source_of: fn(&A) -> u128,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<A: Copy + Eq + Hash> Endpoint<A> {
    /// An endpoint of `cfg` (clamped to what the wire allows) counting sources by `source_of`.
    pub(super) fn new(mut cfg: ServerEngineConfig, source_of: fn(&A) -> u128) -> Endpoint<A> {
        cfg.max_sessions = cfg.max_sessions.clamp(1, 1 << 16);
        cfg.shard = Shard::new(cfg.shard.index, cfg.shard.count);
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
        Endpoint {
            generation,
            secret: ServerSecret::new(&cfg.secret, cfg.cookie_period),
            tokens: 0,
            next_sweep: None,
            source_of,
            cfg,
        }
    }

    /// Whether a bind must return a cookie before it gets a session: over datagrams (the peer
    /// must show it receives at its address) and with a key (the cookie is the server's nonce).
    fn needs_cookie(&self) -> bool {
        !self.cfg.reliable || self.cfg.psk.is_some()
    }

    /// Answers a call or probe `h` for a session this server does not know with
    /// `UnknownSession` and its generation (so a client tells a restart from an expiry), if
    /// that answer is no larger than the `frame_len` bytes that came.
    pub(super) fn answer_unknown_session(
        &self,
        stats: &mut ServerStats,
        from: A,
        h: &Header,
        frame_len: usize,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        stats.unknown_session += 1;
        if !matches!(h.kind, Kind::Call | Kind::Probe) {
            return;
        }
        let mut e = *h;
        e.kind = Kind::Error;
        e.flags = 0;
        e.proc_or_code = ErrorCode::UnknownSession.to_u32();
        e.total_len = 0;
        e.offset = self.generation as u32;
        // No session, no session keys; but a keyed client can believe the key's own.
        let key = self.cfg.psk.as_ref().map(Psk::unbound_key);
        let mut g = Guard::of(key, None);
        if g.head_len() <= frame_len {
            g.emit(e, &[], &mut |hd, b| out(&from, hd, b));
        } else {
            stats.withheld += 1;
        }
    }

    /// A bind: checked (stateless refusals first), then, where the transport or a key asks
    /// for it, answered with a cookie until it comes back with a valid one; then given the
    /// session a retransmission of it already has, or a new one in room the table makes.
    ///
    /// Until the cookie comes back the address is unproven: no answer is larger than the
    /// `frame_len` bytes it sent (an honest bind always has room for every answer). Under a key
    /// every cookie and refusal is tagged over the client's nonce ([`Psk::bind_answer_tag`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_bind(
        &mut self,
        sessions: &mut SessionTable<A>,
        stats: &mut ServerStats,
        from: A,
        h: &Header,
        frame_len: usize,
        body: &[u8],
        now: Instant,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        // Binds read the clock anyway: a server flooded with frames may never time out.
        self.handle_timeout(sessions, stats, now);
        let Ok(bind) = Bind::parse(body) else {
            stats.refused.count(Refusal::Malformed);
            let refusal = BindRefusal(Refusal::Malformed).emit();
            self.answer_bind(stats, &from, Kind::BindRefused, h, None, &refusal, frame_len, out);
            return;
        };
        let req = bind.request;
        let refuse = |this: &mut Self, stats: &mut ServerStats, out: &mut SendTo<'_, A>, r: Refusal| {
            stats.refused.count(r);
            let refusal = BindRefusal(r).emit();
            this.answer_bind(stats, &from, Kind::BindRefused, h, Some(req.nonce), &refusal, frame_len, out);
        };
        if let Err(r) = self.check_request(&req) {
            return refuse(self, stats, out, r);
        }
        let mut server_nonce = [0u8; TAG_LEN];
        if self.needs_cookie() {
            let cookie = bind.cookie.filter(|c| self.secret.check_cookie(&from, req.nonce, c, now));
            let Some(cookie) = cookie else {
                if bind.cookie.is_some() {
                    stats.cookies_rejected += 1;
                }
                let fresh = self.secret.issue_cookie(&from, req.nonce, now);
                if self.answer_bind(stats, &from, Kind::BindRetry, h, Some(req.nonce), &fresh.emit(), frame_len, out) {
                    stats.cookies_issued += 1;
                }
                return;
            };
            if let Some(psk) = &self.cfg.psk {
                if !bind.proof.is_some_and(|proof| psk.check_proof(&body[..BindRequest::LEN], &cookie, &proof)) {
                    return refuse(self, stats, out, Refusal::BadKey);
                }
            }
            server_nonce = cookie.mac;
        }
        let source = (self.source_of)(&from);
        let max_per_source = self.cfg.max_sessions_per_source;
        let idx = match sessions.place(&from, source, req.nonce, &server_nonce, max_per_source) {
            Ok(Placed::Existing(i)) => {
                stats.binds_repeated += 1;
                i
            }
            Ok(Placed::Reclaimed(i)) => {
                stats.sessions_reclaimed += 1;
                self.open_session(sessions, stats, i, from, source, &req, server_nonce, now)
            }
            Ok(Placed::Free(i)) => self.open_session(sessions, stats, i, from, source, &req, server_nonce, now),
            Err(r) => return refuse(self, stats, out, r),
        };
        let s = sessions.at(idx).expect("just found or made");
        let grant = BindGrant {
            slots: s.slots.len() as u16,
            window: s.terms.window,
            byte_order: ByteOrder::host(),
            max_message: s.terms.max_message,
            max_frame: if s.terms.reliable { req.max_frame } else { s.terms.frag_size + s.head_len() },
            generation: self.generation,
            sealed: s.seal_send.is_some(),
        };
        let mut ok = Header::new(Kind::BindOk);
        ok.call_no = h.call_no;
        ok.token = s.terms.token;
        // The grant is tagged, not sealed: sealing begins with the first frame after the bind.
        Guard::of(s.keys.as_ref().map(|k| &k.send), None).emit(ok, &grant.emit(), &mut |hd, b| out(&from, hd, b));
    }

    /// The refusals a bind earns by what it asks alone, before any cookie round: protocol,
    /// frame and window, program and version, and whether it holds the key and asks for the
    /// sealing the server wants.
    fn check_request(&self, req: &BindRequest) -> Result<(), Refusal> {
        let sealed = req.flags & BIND_SEALED != 0;
        if req.proto_min > PROTOCOL_VERSION || req.proto_max < PROTOCOL_VERSION {
            return Err(Refusal::ProtocolMismatch { low: PROTOCOL_VERSION, high: PROTOCOL_VERSION });
        }
        let least_frame = if sealed { SEALED_HEAD_LEN } else { HEADER_LEN + TAG_LEN };
        if (req.max_frame as usize) <= least_frame || req.window < 2 {
            return Err(Refusal::Malformed);
        }
        let Some(p) = self.cfg.programs.iter().find(|p| p.program == req.program) else {
            return Err(Refusal::UnknownProgram { program: req.program });
        };
        if req.version < p.low || req.version > p.high {
            return Err(Refusal::VersionMismatch { low: p.low, high: p.high });
        }
        match (self.cfg.psk.is_some(), req.flags & BIND_KEYED != 0) {
            (true, false) => Err(Refusal::KeyRequired),
            (false, true) => Err(Refusal::KeyNotExpected),
            (false, false) if sealed => Err(Refusal::EncryptionUnavailable),
            (true, true) if self.cfg.require_sealed && !sealed => Err(Refusal::EncryptionRequired),
            _ => Ok(()),
        }
    }

    /// Sends a cookie round or a refusal (`kind`) answering the bind `h` with `body`: tagged
    /// under the key over the client's `nonce` when there is a key and the nonce is known, and
    /// only if it is no larger than the `limit` bytes the bind had. Whether it was sent.
    #[allow(clippy::too_many_arguments)]
    fn answer_bind(
        &self,
        stats: &mut ServerStats,
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
            stats.withheld += 1;
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

    /// Makes session `i` for the bind `req` from `from`: its token, its keys, its terms (what
    /// it asked, within this server's limits); returns `i`.
    #[allow(clippy::too_many_arguments)]
    fn open_session(
        &mut self,
        sessions: &mut SessionTable<A>,
        stats: &mut ServerStats,
        i: usize,
        from: A,
        source: u128,
        req: &BindRequest,
        server_nonce: Tag,
        now: Instant,
    ) -> usize {
        self.tokens += 1;
        // The engines of one endpoint share the secret: each numbers its tokens apart.
        let n = u64::from(self.cfg.shard.index) << 48 | self.tokens;
        let token = token::new(self.generation, sessions.index_of(i), self.secret.random_bits(n));
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
        sessions.insert(
            i,
            Session {
                terms: Terms {
                    token,
                    program: req.program,
                    version: req.version,
                    client_order: req.byte_order,
                    reliable,
                    frag_size: max_frame.saturating_sub(head).max(1),
                    window: req.window.min(self.cfg.window).max(2),
                    max_message: req.max_message.min(self.cfg.max_message),
                },
                nonce: req.nonce,
                server_nonce,
                bind_peer: from,
                source,
                keys,
                seal_send: seal.as_ref().map(|s| s.send.clone()),
                seal_recv: seal.map(|s| s.recv),
                bound_at: now,
                last_active: now,
                active: false,
                slots: (0..slots).map(|_| Slot::new()).collect(),
            },
        );
        stats.binds_granted += 1;
        if self.next_sweep.is_none() {
            self.next_sweep = Some(now + self.sweep_period());
        }
        i
    }

    /// How often sessions are swept: a quarter of the shorter idle limit.
    fn sweep_period(&self) -> Duration {
        self.cfg.session_idle.min(self.cfg.unused_idle) / 4
    }

    /// When `handle_timeout` should next be called.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Sweeps the sessions if a sweep is due. A session never goes before it has been idle
    /// `session_idle`, and, with sweeps every quarter of it (as `poll_timeout` asks), goes
    /// within one and a half times that long; one that has made no call goes once
    /// `unused_idle` has passed since its bind. "Idle" means no frame that passed the replay
    /// check and changed the session (a new call, a new fragment, a first acknowledgement): a
    /// replayed frame keeps nothing alive.
    pub(super) fn handle_timeout(&mut self, sessions: &mut SessionTable<A>, stats: &mut ServerStats, now: Instant) {
        if self.next_sweep.is_some_and(|t| now >= t) {
            stats.sessions_expired += sessions.sweep(now, self.cfg.session_idle, self.cfg.unused_idle);
            self.next_sweep = (sessions.len() > 0).then(|| now + self.sweep_period());
        }
    }
}
