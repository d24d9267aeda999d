//! Errors from parsing ONC RPC messages and records and from talking to rpcbind.

/// A message that could not be read, or an rpcbind exchange that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("message truncated reading {what} at byte {offset} of {len}")]
    Truncated { what: &'static str, offset: usize, len: usize },
    #[error("{what} is {len} bytes, more than the maximum {max}")]
    TooLong { what: &'static str, len: usize, max: usize },
    #[error("message type {0} is neither CALL (0) nor REPLY (1)")]
    BadMessageType(u32),
    #[error("expected a {expected} message")]
    UnexpectedType { expected: &'static str },
    #[error("call speaks RPC version {got}; only version 2 is supported")]
    RpcVersion { xid: u32, got: u32 },
    #[error("malformed {flavor} credential: {reason}")]
    BadCredential { xid: u32, flavor: &'static str, reason: String },
    #[error("unsupported authentication flavor {flavor} in the {part}")]
    UnsupportedFlavor { xid: u32, flavor: u32, part: &'static str },
    #[error("reply status {what} has unknown value {value}")]
    UnknownStatus { what: &'static str, value: u32 },
    #[error("rpcbind at {addr}: {reason}")]
    Rpcbind { addr: String, reason: String },
    #[error("{op}: {source}")]
    Io { op: String, source: std::io::Error },
}

impl Error {
    /// The xid of the call, when the call got far enough to have one and deserves an answer.
    pub fn xid(&self) -> Option<u32> {
        match self {
            Error::RpcVersion { xid, .. } | Error::BadCredential { xid, .. } | Error::UnsupportedFlavor { xid, .. } => {
                Some(*xid)
            }
            _ => None,
        }
    }
}

/// What went wrong reading a record-marked TCP stream.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record of at least {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge { size: usize, max: usize },
}
