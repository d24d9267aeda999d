use std::io;
use std::path::PathBuf;

use crate::ring::RingError;

/// What went wrong on a shared-memory binding or listener. Each message names the operation.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    #[error("shm {op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("shm listen: refusing to replace {path}: {why}")]
    PathInUse { path: PathBuf, why: &'static str },
    #[error("shm connect: the server refused this peer (uid {uid}, gid {gid}) by its policy")]
    Refused { uid: u32, gid: u32 },
    #[error("shm connect: the server is at its binding limit")]
    Busy,
    #[error("shm connect: bad handshake: {what}")]
    Handshake { what: &'static str },
    #[error("shm ring: {0}")]
    Ring(#[from] RingError),
    #[error("shm: the peer hung up (process exited or closed the binding)")]
    PeerGone,
    #[error("shm {op}: deadline passed")]
    Timeout { op: &'static str },
    #[error("shm: binding unusable after an earlier failure: {0}")]
    Broken(String),
    #[error("shm reply: the client left no room in its result ring for {waited_ms} ms")]
    Stalled { waited_ms: u64 },
}

pub(crate) fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ShmError {
    move |source| ShmError::Io { op, source }
}
