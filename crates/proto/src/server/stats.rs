//! The server's counters: what it did on its own, answered and dropped, for a person to read.
//! Plain numbers kept by the serving thread, bumped by whichever part of the engine saw the
//! event.

use crate::wire::Refusal;

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
    /// The client's source held [`ServerEngineConfig::max_sessions_per_source`](super::ServerEngineConfig::max_sessions_per_source) sessions.
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

    pub(super) fn count(&mut self, r: Refusal) {
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
