//! The errors a lowlat user sees. Each message says what happened, where, and, for failed calls,
//! whether the procedure may have run.

use std::time::Duration;

use lowlat_proto::Execution;

/// Everything that can go wrong binding to a server or making a call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid endpoint {uri:?}: {reason}")]
    InvalidUri { uri: String, reason: String },

    #[error("{uri}: the {scheme} transport is not available in this build or on this machine: {reason}")]
    Unsupported { uri: String, scheme: String, reason: String },

    #[error("{uri}: no server is running there ({detail})")]
    ServerNotRunning { uri: String, detail: String },

    #[error("{uri}: the server does not serve program {program} ({program:#x})")]
    UnknownProgram { uri: String, program: u32 },

    #[error("{uri}: program {program:#x} version {requested} is not served; the server has versions {low} to {high}")]
    VersionMismatch { uri: String, program: u32, requested: u32, low: u32, high: u32 },

    #[error("{uri}: the server speaks lowlat protocol versions {low} to {high}; this client speaks {ours}")]
    ProtocolMismatch { uri: String, ours: u8, low: u8, high: u8 },

    #[error("{uri}: the server has no room for another session; try again later or raise its --max-sessions")]
    TooManySessions { uri: String },

    #[error("{uri}: the server holds as many sessions from this address as it allows one source; close some or raise its --max-sessions-per-source")]
    SourceLimit { uri: String },

    #[error("{uri}: {reason}")]
    KeyMismatch { uri: String, reason: KeyMismatch },

    #[error("pre-shared key file {path}: {reason}")]
    KeyFile { path: String, reason: String },

    #[error("{uri}: the server refused the binding: {reason}")]
    BindRefused { uri: String, reason: String },

    #[error("{uri}: no answer to the bind request within {after:?}; is a lowlat server running there?")]
    BindTimeout { uri: String, after: Duration },

    #[error("procedure {proc_no} timed out after {after:?}: {execution}")]
    Timeout { proc_no: u32, after: Duration, execution: Execution },

    #[error("the server has no procedure {proc_no} in program {program:#x} version {version}")]
    UnknownProcedure { program: u32, version: u32, proc_no: u32 },

    #[error("the server could not decode the arguments of procedure {proc_no}")]
    GarbageArgs { proc_no: u32 },

    #[error("procedure {proc_no} failed on the server")]
    ServerError { proc_no: u32 },

    #[error("the server is overloaded and shed procedure {proc_no} without running it; try again")]
    Busy { proc_no: u32 },

    #[error("a message of {size} bytes exceeds this binding's maximum of {max} bytes")]
    TooLarge { size: usize, max: usize },

    #[error("{uri}: connection lost during procedure {proc_no} ({source}): {execution}")]
    ConnectionLost { uri: String, proc_no: u32, execution: Execution, source: std::io::Error },

    #[error("the server restarted during procedure {proc_no}: the call may have executed before the restart")]
    ServerRestarted { proc_no: u32 },

    #[error("the server no longer knows this session (procedure {proc_no}): {execution}")]
    SessionLost { proc_no: u32, execution: Execution },

    #[error("encoding the arguments of procedure {proc_no}: {source}")]
    Encode { proc_no: u32, source: Box<dyn std::error::Error + Send + Sync> },

    #[error("decoding the result of procedure {proc_no}: {source}")]
    Decode { proc_no: u32, source: Box<dyn std::error::Error + Send + Sync> },

    #[error("the server answered with an error this client does not know (code {code})")]
    UnknownRemoteError { code: u32 },

    #[error("{op}: {source}")]
    Io { op: String, source: std::io::Error },

    #[error("{uri}: the server speaks ONC RPC versions {low} to {high}, not version 2")]
    RpcMismatch { uri: String, low: u32, high: u32 },

    #[error("{uri}: the server refused the credentials of procedure {proc_no}: {reason}")]
    AuthError { uri: String, proc_no: u32, reason: lowlat_onc::AuthStat },

    #[error("{uri}: rpcbind on {host} cannot say where program {program:#x} version {version} is: {detail}")]
    NotRegistered { uri: String, host: String, program: u32, version: u32, detail: String },

    #[error("{uri}: malformed ONC RPC reply to procedure {proc_no}: {detail}")]
    MalformedReply { uri: String, proc_no: u32, detail: String },
}

/// Why a binding with a pre-shared key, or without one, was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyMismatch {
    /// The server requires a key; the client has none.
    ServerRequiresKey,
    /// The client has a key; the server has none.
    ServerHasNoKey,
    /// Both have keys, and they differ.
    KeysDiffer,
}

impl std::fmt::Display for KeyMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyMismatch::ServerRequiresKey => {
                "the server requires a pre-shared key and this client has none (give it the server's with --psk-file)"
            }
            KeyMismatch::ServerHasNoKey => {
                "this client has a pre-shared key but the server is configured without one (drop --psk-file, or give the server the same key)"
            }
            KeyMismatch::KeysDiffer => "the server refused this client's pre-shared key: the two keys differ",
        })
    }
}

impl Error {
    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { op: op.into(), source }
    }

    /// Whether the procedure may have run: false only when lowlat knows it did not.
    pub fn may_have_executed(&self) -> bool {
        match self {
            Error::Timeout { execution, .. }
            | Error::ConnectionLost { execution, .. }
            | Error::SessionLost { execution, .. } => *execution != Execution::NotSent,
            Error::ServerRestarted { .. } | Error::ServerError { .. } | Error::Decode { .. } => true,
            Error::Io { .. } | Error::UnknownRemoteError { .. } | Error::MalformedReply { .. } => true,
            _ => false,
        }
    }
}
