//! Errors from parsing ONC RPC messages and records and from talking to rpcbind.

/// A message that could not be read, or an rpcbind exchange that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The message ended before a field did.
    #[error("message truncated reading {what} at byte {offset} of {len}")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Where it started, in bytes from the start of the message.
        offset: usize,
        /// Bytes in the message.
        len: usize,
    },
    /// A variable-length field claims more bytes than its limit allows.
    #[error("{what} is {len} bytes, more than the maximum {max}")]
    TooLong {
        /// The field.
        what: &'static str,
        /// Bytes it claims.
        len: usize,
        /// Bytes allowed.
        max: usize,
    },
    /// The `msg_type` word is neither CALL nor REPLY.
    #[error("message type {0} is neither CALL (0) nor REPLY (1)")]
    BadMessageType(u32),
    /// A call where a reply was expected, or the reverse.
    #[error("expected a {expected} message")]
    UnexpectedType {
        /// `"CALL"` or `"REPLY"`.
        expected: &'static str,
    },
    /// A call of another RPC version than 2 (answered `RPC_MISMATCH`).
    #[error("call speaks RPC version {got}; only version 2 is supported")]
    RpcVersion {
        /// The call's xid, to answer it.
        xid: u32,
        /// The version it asked for.
        got: u32,
    },
    /// A credential of a known flavour whose body does not parse (answered `AUTH_BADCRED`).
    #[error("malformed {flavor} credential: {reason}")]
    BadCredential {
        /// The call's xid, to answer it.
        xid: u32,
        /// The flavour's name, e.g. `"AUTH_SYS"`.
        flavor: &'static str,
        /// What is wrong with the body.
        reason: String,
    },
    /// A credential or verifier of a flavour this crate does not speak (answered
    /// `AUTH_REJECTEDCRED`, as libtirpc does, or `AUTH_BADVERF`).
    #[error("unsupported authentication flavor {flavor} in the {part}")]
    UnsupportedFlavor {
        /// The call's xid, to answer it.
        xid: u32,
        /// The flavour number sent.
        flavor: u32,
        /// `"credential"` or `"verifier"`.
        part: &'static str,
    },
    /// A reply's status word has a value RFC 5531 does not define.
    #[error("reply status {what} has unknown value {value}")]
    UnknownStatus {
        /// Which status (`reply_stat`, `accept_stat`, `reject_stat`).
        what: &'static str,
        /// The value sent.
        value: u32,
    },
    /// rpcbind could not be asked, or its answer makes no sense.
    #[error("rpcbind at {addr}: {reason}")]
    Rpcbind {
        /// The rpcbind asked (`HOST:111`).
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: String,
        /// The system's error.
        source: std::io::Error,
    },
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
    /// A record's fragments add up to more than the maximum; the stream cannot be read further.
    #[error("record of at least {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Bytes of the record so far (it may be longer still).
        size: usize,
        /// Bytes allowed.
        max: usize,
    },
}
