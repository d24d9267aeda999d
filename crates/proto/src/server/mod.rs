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
//!
//! The engine is in parts, as quinn-proto splits its `Endpoint` from its `Connection`:
//!
//! - `endpoint`: binds, cookies, key proofs, new sessions, answers for unknown ones, the sweep;
//! - `sessions`: the table of sessions, found by token, with room made by reclaiming idle ones;
//! - `shard`: an endpoint's engines (one per serving thread), their ranges of tokens and the
//!   census that keeps the session limits the endpoint's;
//! - `connection`: one session's slots, the at-most-once rule, fragments and kept results;
//! - `call`, `config`, `stats`: the plain types these share with the engine's user.
//!
//! [`ErrorMessage`]: crate::wire::ErrorMessage

mod call;
mod config;
mod connection;
mod endpoint;
mod sessions;
mod shard;
mod stats;

use core::hash::Hash;
use std::time::Instant;

pub use call::{CallKey, IncomingCall, Status};
pub use config::{ProgramVersions, ServerEngineConfig};
pub use shard::{Census, Shard};
pub use stats::{Refusals, ServerStats};

use endpoint::Endpoint;
use sessions::SessionTable;

use crate::wire::{Header, Kind, HEADER_LEN, PROTOCOL_VERSION};

/// The server's protocol state for one transport endpoint. `A` is the transport's peer address.
#[derive(Debug)]
pub struct ServerEngine<A> {
    endpoint: Endpoint<A>,
    sessions: SessionTable<A>,
    /// What the engine did on its own since it was made.
    pub stats: ServerStats,
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
    pub fn with_source(cfg: ServerEngineConfig, source_of: fn(&A) -> u128) -> ServerEngine<A> {
        let endpoint = Endpoint::new(cfg, source_of);
        let cfg = &endpoint.cfg;
        let sessions = SessionTable::new(cfg.max_sessions, cfg.shard, cfg.census.clone());
        ServerEngine { sessions, endpoint, stats: ServerStats::default() }
    }

    /// The server generation: changes with every server start, so clients detect restarts.
    pub fn generation(&self) -> u16 {
        self.endpoint.generation
    }

    /// Sessions alive now.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes held for results and reassembly across all sessions (to check state is bounded).
    pub fn buffered_bytes(&self) -> usize {
        self.sessions.buffered_bytes()
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
            self.endpoint.handle_bind(&mut self.sessions, &mut self.stats, from, &h, frame.len(), body, now(), out);
            return None;
        }
        if h.version != PROTOCOL_VERSION {
            self.stats.malformed += 1;
            return None;
        }
        let Some(sess) = self.sessions.get_mut(h.token) else {
            self.endpoint.answer_unknown_session(&mut self.stats, from, &h, frame.len(), out);
            return None;
        };
        sess.handle(from, &h, frame, body, &mut self.endpoint.secret, now, &mut self.stats, out)
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
        self.sessions.get_mut(c.token)?.take_whole_call(from, c, body, &mut self.stats)
    }

    /// Completes a call whose result the procedure appended to the `reply` buffer it was given.
    /// Returns false when the call is no longer wanted (session expired or slot reused).
    pub fn finish(&mut self, key: CallKey, status: Status, out: &mut impl FnMut(&A, &[u8], &[u8])) -> bool {
        let Some((sess, i)) = self.sessions.running(key) else { return false };
        sess.finish(i, status, out);
        true
    }

    /// Completes a call whose procedure wrote its `len`-byte result straight where the transport
    /// will send it from (a shared-memory result ring): writes the header to put before it into
    /// `head` (where it is sent from, so it is written once) and returns `true`. `false`, with
    /// `head` untouched, when that cannot be the reply (a failed call, a result larger than the
    /// session allows, a session that may need the result again to retransmit it or whose frames
    /// carry tags, a call no longer wanted): then finish it with
    /// [`finish_with`](Self::finish_with) as usual.
    #[inline]
    pub fn finish_placed(&mut self, key: CallKey, status: Status, len: usize, head: &mut [u8; HEADER_LEN]) -> bool {
        self.sessions.running(key).is_some_and(|(sess, i)| sess.finish_placed(i, status, len, head))
    }

    /// Completes a call with a result produced elsewhere (copied into the slot).
    pub fn finish_with(
        &mut self,
        key: CallKey,
        status: Status,
        result: &[u8],
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) -> bool {
        let Some((sess, i)) = self.sessions.running(key) else { return false };
        sess.set_result(i, result);
        sess.finish(i, status, out);
        true
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    /// Drops sessions idle past the limit.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(&mut self.sessions, &mut self.stats, now);
    }

    /// Forgets a peer whose connection closed (stream transports): sessions bound by it, and
    /// whose slots all came from it, go at once rather than at expiry.
    pub fn forget_peer(&mut self, peer: &A) {
        self.stats.sessions_closed += self.sessions.forget_peer(peer);
    }
}
