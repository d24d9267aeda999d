//! The one error type of shared-memory connections and listeners.

use std::io;
use std::path::PathBuf;

use crate::ring::RingError;

/// What went wrong on a shared-memory connection or listener. Each message names the operation.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// A system call failed.
    #[error("shm {op}: {source}")]
    Io {
        /// What was being done (`"connect"`, `"map segment"`, ...).
        op: &'static str,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The socket path is taken by something a listener must not remove (a live server, or a
    /// file that is not a socket).
    #[error("shm listen: refusing to replace {path}: {why}")]
    PathInUse {
        /// The listener's socket path.
        path: PathBuf,
        /// What is there.
        why: &'static str,
    },
    /// The server's policy does not admit this client's credentials.
    #[error("shm connect: the server refused this peer (uid {uid}, gid {gid}) by its policy")]
    Refused {
        /// The client's user id, as the kernel reported it to the server.
        uid: u32,
        /// The client's group id, as the kernel reported it to the server.
        gid: u32,
    },
    /// The server holds as many connections as it allows; try again after one closes.
    #[error("shm connect: the server is at its connection limit")]
    Busy,
    /// The peer's handshake was malformed (wrong size, version, descriptors or segment).
    #[error("shm connect: bad handshake: {what}")]
    Handshake {
        /// What was wrong with it.
        what: &'static str,
    },
    /// A ring's shared state broke its invariants (a hostile or corrupted peer).
    #[error("shm ring: {0}")]
    Ring(#[from] RingError),
    /// The peer's end of the liveness socket closed.
    #[error("shm: the peer hung up (process exited or closed the connection)")]
    PeerGone,
    /// A wait outlived its deadline.
    #[error("shm {op}: deadline passed")]
    Timeout {
        /// What was waited for.
        op: &'static str,
    },
    /// The connection cannot be used: an earlier failure broke it, or the peer broke the protocol
    /// (the message says how). Make a new connection.
    #[error("shm: connection unusable after an earlier failure: {0}")]
    Broken(String),
    /// A reply could not be written because the client stopped reading its results.
    #[error("shm reply: the client left no room in its result ring for {waited_ms} ms")]
    Stalled {
        /// How long the server waited for room, in milliseconds.
        waited_ms: u64,
    },
}

pub(crate) fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ShmError {
    move |source| ShmError::Io { op, source }
}
