//! The errors a lowlat user sees. Each message says what happened and where: a failed call's
//! names its endpoint and procedure ([`CallSite`]), says what the server said about it when it
//! said something, and whether the procedure may have run.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lowlat_proto::Execution;

/// The call an error is about: where it went and which procedure. Shown as
/// `udp://127.0.0.1:7000: MINUS (program 0x20004c4c version 1, procedure 1)`, or without the
/// name (`procedure 1 of program 0x20004c4c version 1`) when the client was not told names
/// ([`Client::name_procedures`](crate::Client::name_procedures); generated clients are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The endpoint, as given to `connect`.
    pub uri: Arc<str>,
    pub program: u32,
    pub version: u32,
    pub proc_no: u32,
    /// The procedure's name in its interface definition, when the client knows it.
    pub name: Option<Arc<str>>,
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CallSite { uri, program, version, proc_no, name } = self;
        match name {
            Some(name) => write!(f, "{uri}: {name} (program {program:#x} version {version}, procedure {proc_no})"),
            None => write!(f, "{uri}: procedure {proc_no} of program {program:#x} version {version}"),
        }
    }
}

/// A duration as a person reads it: three significant digits in the largest unit that is at
/// least one (`1.00 s`, `250 ms`, `12.5 µs`), never `1.000012345s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounded(pub Duration);

impl fmt::Display for Rounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos() as f64;
        let (value, unit) = match ns {
            n if n >= 1e9 => (n / 1e9, "s"),
            n if n >= 1e6 => (n / 1e6, "ms"),
            n if n >= 1e3 => (n / 1e3, "µs"),
            n => (n, "ns"),
        };
        let decimals = match value {
            v if unit == "ns" || v >= 100.0 => 0,
            v if v >= 10.0 => 1,
            _ => 2,
        };
        write!(f, "{value:.decimals$} {unit}")
    }
}

fn rounded(d: &Duration) -> Rounded {
    Rounded(*d)
}

fn not_run(message: &Option<String>) -> &str {
    message.as_deref().unwrap_or("the server is overloaded and shed it")
}

fn too_large(size: &Option<usize>) -> String {
    match size {
        Some(size) => format!("a message of {size} bytes"),
        None => "the server found that a message".to_string(),
    }
}

/// `: reason` when the server gave one.
struct Reason<'a>(&'a Option<String>);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(r) => write!(f, ": {r}"),
            None => Ok(()),
        }
    }
}

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

    #[error("{uri}: no answer to the bind request within {}; is a lowlat server running there?", rounded(.after))]
    BindTimeout { uri: String, after: Duration },

    #[error("{call} timed out after {}: {execution}", rounded(.after))]
    Timeout { call: CallSite, after: Duration, execution: Execution },

    #[error("{call}: the server has no such procedure")]
    UnknownProcedure { call: CallSite },

    /// The server could not decode the arguments; `detail` says which and where when the server
    /// said (lowlat servers' generated stubs do, over lowlat's protocol).
    #[error("{call}: the server could not decode the arguments{}", Reason(.detail))]
    GarbageArgs { call: CallSite, detail: Option<String> },

    /// The procedure failed; `message` is its reason when it gave one
    /// ([`ProcError::failed`](crate::ProcError::failed)) and the protocol carries it (lowlat's
    /// does; ONC RPC has no place for it).
    #[error("{call} failed on the server{}", Reason(.message))]
    ServerError { call: CallSite, message: Option<String> },

    /// The server did not run the call (overloaded, or stopping); `message` says which.
    #[error("{call} was not run: {}; try again", not_run(.message))]
    Busy { call: CallSite, message: Option<String> },

    /// A message is larger than the binding allows: the arguments (`size` known), or the result
    /// (refused by the server).
    #[error("{call}: {} exceeds this binding's maximum message of {max} bytes", too_large(.size))]
    TooLarge { call: CallSite, size: Option<usize>, max: usize },

    #[error("{call}: connection lost ({source}): {execution}")]
    ConnectionLost { call: CallSite, execution: Execution, source: std::io::Error },

    #[error("{call}: the server restarted during the call, which may have executed before the restart")]
    ServerRestarted { call: CallSite },

    #[error("{call}: the server no longer knows this session: {execution}")]
    SessionLost { call: CallSite, execution: Execution },

    #[error("{call}: encoding the arguments: {source}")]
    Encode { call: CallSite, source: Box<dyn std::error::Error + Send + Sync> },

    #[error("{call}: decoding the result: {source}")]
    Decode { call: CallSite, source: Box<dyn std::error::Error + Send + Sync> },

    #[error("{call}: the server answered with an error this client does not know (code {code}){}", Reason(.message))]
    UnknownRemoteError { call: CallSite, code: u32, message: Option<String> },

    #[error("{op}: {source}")]
    Io { op: String, source: std::io::Error },

    #[error("{call}: the server speaks ONC RPC versions {low} to {high}, not version 2")]
    RpcMismatch { call: CallSite, low: u32, high: u32 },

    #[error("{call}: the server refused the credentials: {reason}")]
    AuthError { call: CallSite, reason: lowlat_onc::AuthStat },

    #[error("{uri}: rpcbind on {host} cannot say where program {program:#x} version {version} is: {detail}")]
    NotRegistered { uri: String, host: String, program: u32, version: u32, detail: String },

    #[error("{call}: malformed reply: {detail}")]
    MalformedReply { call: CallSite, detail: String },

    #[error("program {program:#x} version {version} has no procedure named {name:?} (it has {known})")]
    NoSuchProcedure { program: u32, version: u32, name: String, known: String },
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

    /// The call this error is about, for the errors of a call.
    pub fn call(&self) -> Option<&CallSite> {
        match self {
            Error::Timeout { call, .. }
            | Error::UnknownProcedure { call }
            | Error::GarbageArgs { call, .. }
            | Error::ServerError { call, .. }
            | Error::Busy { call, .. }
            | Error::TooLarge { call, .. }
            | Error::ConnectionLost { call, .. }
            | Error::ServerRestarted { call }
            | Error::SessionLost { call, .. }
            | Error::Encode { call, .. }
            | Error::Decode { call, .. }
            | Error::UnknownRemoteError { call, .. }
            | Error::RpcMismatch { call, .. }
            | Error::AuthError { call, .. }
            | Error::MalformedReply { call, .. } => Some(call),
            _ => None,
        }
    }

    fn call_mut(&mut self) -> Option<&mut CallSite> {
        match self {
            Error::Timeout { call, .. }
            | Error::UnknownProcedure { call }
            | Error::GarbageArgs { call, .. }
            | Error::ServerError { call, .. }
            | Error::Busy { call, .. }
            | Error::TooLarge { call, .. }
            | Error::ConnectionLost { call, .. }
            | Error::ServerRestarted { call }
            | Error::SessionLost { call, .. }
            | Error::Encode { call, .. }
            | Error::Decode { call, .. }
            | Error::UnknownRemoteError { call, .. }
            | Error::RpcMismatch { call, .. }
            | Error::AuthError { call, .. }
            | Error::MalformedReply { call, .. } => Some(call),
            _ => None,
        }
    }

    /// This error with its procedure named from `names`, when it is a call's.
    #[cold]
    #[inline(never)]
    pub(crate) fn named(mut self, names: &[(u32, Arc<str>)]) -> Error {
        if let Some(call) = self.call_mut() {
            if call.name.is_none() {
                call.name = names.iter().find(|(n, _)| *n == call.proc_no).map(|(_, name)| name.clone());
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_rounded_to_three_digits() {
        let shown = |d: Duration| Rounded(d).to_string();
        assert_eq!(shown(Duration::from_nanos(1_000_012_345)), "1.00 s");
        assert_eq!(shown(Duration::from_secs(10)), "10.0 s");
        assert_eq!(shown(Duration::from_secs(150)), "150 s");
        assert_eq!(shown(Duration::from_millis(250)), "250 ms");
        assert_eq!(shown(Duration::from_micros(2_534)), "2.53 ms");
        assert_eq!(shown(Duration::from_nanos(12_500)), "12.5 µs");
        assert_eq!(shown(Duration::from_nanos(999)), "999 ns");
        assert_eq!(shown(Duration::ZERO), "0 ns");
    }

    #[test]
    fn a_call_error_names_its_endpoint_and_procedure() {
        let call =
            CallSite { uri: "udp://127.0.0.1:7000".into(), program: 0x2000_4c4c, version: 1, proc_no: 1, name: None };
        let e = Error::ServerError { call: call.clone(), message: Some("insufficient funds".into()) };
        assert_eq!(
            e.to_string(),
            "udp://127.0.0.1:7000: procedure 1 of program 0x20004c4c version 1 failed on the server: insufficient funds"
        );
        let e = e.named(&[(0, "NULL".into()), (1, "MINUS".into())]);
        assert_eq!(
            e.to_string(),
            "udp://127.0.0.1:7000: MINUS (program 0x20004c4c version 1, procedure 1) failed on the server: insufficient funds"
        );
        let e = Error::Timeout { call, after: Duration::from_nanos(1_000_012_345), execution: Execution::Unknown };
        let shown = e.named(&[(1, "MINUS".into())]).to_string();
        assert!(
            shown.starts_with(
                "udp://127.0.0.1:7000: MINUS (program 0x20004c4c version 1, procedure 1) timed out after 1.00 s: "
            ),
            "{shown}"
        );
    }
}

impl From<lowlat_transport::UriError> for Error {
    fn from(e: lowlat_transport::UriError) -> Error {
        Error::InvalidUri { uri: e.uri, reason: e.reason }
    }
}
