//! What a server is told when it is made: the programs it serves, its limits and timers, and
//! its secrets. Plain data, checked and clamped once when the engine is made
//! ([`ServerEngine::with_source`](super::ServerEngine::with_source)).

use core::time::Duration;
use std::sync::Arc;

use super::shard::{Census, Shard};
use crate::auth::Psk;

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
    /// Sessions at once, across the endpoint (at most 65536: the index is 16 bits of the
    /// token).
    pub max_sessions: usize,
    /// Call slots a session may have (a bind asking more gets this many; at least 1).
    pub max_slots: u16,
    /// Largest message, arguments or result, in bytes (a bind asking more gets this).
    pub max_message: u32,
    /// Largest frame this server's transport carries.
    pub max_frame: u32,
    /// Fragments in flight per message at most (kept within 2 to [`MAX_WINDOW`](crate::MAX_WINDOW)).
    pub window: u16,
    /// Sessions idle this long are dropped (by a sweep every quarter of it: within one and a half
    /// times this long).
    pub session_idle: Duration,
    /// Sessions that have made no call this long after their bind are dropped (within one and a
    /// quarter times this long): an honest client calls soon after binding.
    pub unused_idle: Duration,
    /// Sessions one source (an IP address, a MAC address: see [`ServerEngine::with_source`](super::ServerEngine::with_source))
    /// holds at once, across the endpoint.
    pub max_sessions_per_source: usize,
    /// The transport delivers every frame, in order (TCP, shared memory): sessions keep no
    /// results for retransmission and take frames of any size. Set by whoever opens the
    /// transport, never from what a client says.
    pub reliable: bool,
    /// Binds must prove this key, and every frame of a session carries a tag under keys derived
    /// from it. `None`: unauthenticated sessions.
    pub psk: Option<Psk>,
    /// Every session must be sealed (its frames encrypted, `crate::seal`): an unsealed bind is
    /// refused with [`Refusal::EncryptionRequired`](crate::wire::Refusal::EncryptionRequired). Without it, a client may still ask for a
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
    /// Which of the endpoint's engines this is (one per serving thread): it makes sessions in
    /// its own range of indexes. The engines of one endpoint share `seed` and `secret` (one
    /// generation; a cookie one issued, another accepts).
    pub shard: Shard,
    /// The sessions alive across the endpoint's engines, shared by them when there are several
    /// (`None`: this engine is the endpoint's only one).
    pub census: Option<Arc<Census>>,
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
            shard: Shard::ONLY,
            census: None,
        }
    }
}
