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
    /// The program number.
    pub program: u32,
    /// The program version.
    pub version: u32,
    /// The procedure number within the program version.
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

/// Everything that can go wrong binding to a server or making a call. New kinds of failure are
/// added as lowlat grows (a `match` needs a catch-all arm).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The endpoint could not be parsed.
    #[error("invalid endpoint {uri:?}: {reason}")]
    InvalidUri {
        /// The endpoint as given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The endpoint's transport cannot be used here.
    #[error("{uri}: the {scheme} transport is not available in this build or on this machine: {reason}")]
    Unsupported {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// The transport's scheme, such as `udp` or `onc+tcp`.
        scheme: String,
        /// Why it is not available.
        reason: String,
    },

    /// Nothing answers at the endpoint.
    #[error("{uri}: no server is running there ({detail})")]
    ServerNotRunning {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// What the operating system said (for example, connection refused).
        detail: String,
    },

    /// The server does not serve the program.
    #[error("{uri}: the server does not serve program {program} ({program:#x})")]
    UnknownProgram {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// The program number asked for.
        program: u32,
    },

    /// The server serves the program, but not this version.
    #[error("{uri}: program {program:#x} version {requested} is not served; the server has versions {low} to {high}")]
    VersionMismatch {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// The program number.
        program: u32,
        /// The version asked for.
        requested: u32,
        /// The lowest version the server has.
        low: u32,
        /// The highest version the server has.
        high: u32,
    },

    /// The server and this client share no lowlat protocol version.
    #[error("{uri}: the server speaks lowlat protocol versions {low} to {high}; this client speaks {ours}")]
    ProtocolMismatch {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// The protocol version this client speaks.
        ours: u8,
        /// The lowest protocol version the server speaks.
        low: u8,
        /// The highest protocol version the server speaks.
        high: u8,
    },

    /// The server holds as many sessions as it allows (its `--max-sessions`).
    #[error("{uri}: the server has no room for another session; try again later or raise its --max-sessions")]
    TooManySessions {
        /// The endpoint, as given to `connect`.
        uri: String,
    },

    /// The server holds as many sessions from this address as it allows one source (its
    /// `--max-sessions-per-source`).
    #[error("{uri}: the server holds as many sessions from this address as it allows one source; close some or raise its --max-sessions-per-source")]
    SourceLimit {
        /// The endpoint, as given to `connect`.
        uri: String,
    },

    /// The client and server disagree about the pre-shared key.
    #[error("{uri}: {reason}")]
    KeyMismatch {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// Which side has a key, or that the keys differ.
        reason: KeyMismatch,
    },

    /// Under a pre-shared key nothing the server sent verified by the bind's deadline, but
    /// answers came that did not: a server holding another key or none, or someone on the path
    /// forging refusals. Not believed, so not reported as the server's word.
    #[error("{uri}: unauthenticated refusal: {}no answer verified under this client's pre-shared key within {after:?} (the server holds another key or none, or someone on the path forged the answers)", claim.as_ref().map(|c| format!("the answers said \"{c}\", but ")).unwrap_or_default())]
    UnauthenticatedRefusal {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// What the last unauthenticated refusal said, if one came.
        claim: Option<String>,
        /// How long the bind was tried.
        after: std::time::Duration,
    },

    /// The two ends disagree about encrypting frames, or encryption was asked where it cannot
    /// be had.
    #[error("{uri}: {reason}")]
    Encryption {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// What is wrong.
        reason: String,
    },

    /// The pre-shared key file could not be read or is malformed.
    #[error("pre-shared key file {path}: {reason}")]
    KeyFile {
        /// The file's path.
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// The server refused the binding for another reason.
    #[error("{uri}: the server refused the binding: {reason}")]
    BindRefused {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// The server's reason.
        reason: String,
    },

    /// No answer to the bind request in time.
    #[error("{uri}: no answer to the bind request within {}; is a lowlat server running there?", rounded(.after))]
    BindTimeout {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// How long the bind waited.
        after: Duration,
    },

    /// The call got no result in time.
    #[error("{call} timed out after {}: {execution}", rounded(.after))]
    Timeout {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// How long the call waited.
        after: Duration,
        /// Whether the procedure may have run.
        execution: Execution,
    },

    /// The server's program version has no such procedure.
    #[error("{call}: the server has no such procedure")]
    UnknownProcedure {
        /// The endpoint and procedure the call was for.
        call: CallSite,
    },

    /// The server could not decode the arguments; `detail` says which and where when the server
    /// said (lowlat servers' generated stubs do, over lowlat's protocol).
    #[error("{call}: the server could not decode the arguments{}", Reason(.detail))]
    GarbageArgs {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// Which argument could not be decoded and where, when the server said.
        detail: Option<String>,
    },

    /// The procedure failed; `message` is its reason when it gave one
    /// ([`ProcError::failed`](crate::ProcError::failed)) and the protocol carries it (lowlat's
    /// does; ONC RPC has no place for it).
    #[error("{call} failed on the server{}", Reason(.message))]
    ServerError {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The procedure's reason, when it gave one and the protocol carries it.
        message: Option<String>,
    },

    /// The server did not run the call (overloaded, or stopping); `message` says which.
    #[error("{call} was not run: {}; try again", not_run(.message))]
    Busy {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// Why the server did not run it (overloaded, or stopping), when it said.
        message: Option<String>,
    },

    /// A message is larger than the binding allows: the arguments (`size` known), or the result
    /// (refused by the server).
    #[error("{call}: {} exceeds this binding's maximum message of {max} bytes", too_large(.size))]
    TooLarge {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The size of the arguments in bytes; `None` when the server refused the result.
        size: Option<usize>,
        /// The binding's maximum message size, in bytes.
        max: usize,
    },

    /// The connection failed during the call.
    #[error("{call}: connection lost ({source}): {execution}")]
    ConnectionLost {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// Whether the procedure may have run.
        execution: Execution,
        /// The I/O error that ended the connection.
        source: std::io::Error,
    },

    /// The server restarted during the call; the procedure may have run before the restart.
    #[error("{call}: the server restarted during the call, which may have executed before the restart")]
    ServerRestarted {
        /// The endpoint and procedure the call was for.
        call: CallSite,
    },

    /// The server no longer knows this session.
    #[error("{call}: the server no longer knows this session: {execution}")]
    SessionLost {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// Whether the procedure may have run.
        execution: Execution,
    },

    /// The arguments could not be encoded; nothing was sent.
    #[error("{call}: encoding the arguments: {source}")]
    Encode {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The encoder's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The result could not be decoded; the procedure ran.
    #[error("{call}: decoding the result: {source}")]
    Decode {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The decoder's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The server answered with an error code this client does not know.
    #[error("{call}: the server answered with an error this client does not know (code {code}){}", Reason(.message))]
    UnknownRemoteError {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The error code as received.
        code: u32,
        /// The server's message, when it gave one.
        message: Option<String>,
    },

    /// An I/O operation outside a call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done, usually prefixed by the endpoint (`udp://…: serve`).
        op: String,
        /// The I/O error.
        source: std::io::Error,
    },

    /// The ONC RPC server does not speak RPC version 2.
    #[error("{call}: the server speaks ONC RPC versions {low} to {high}, not version 2")]
    RpcMismatch {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The lowest RPC version the server speaks.
        low: u32,
        /// The highest RPC version the server speaks.
        high: u32,
    },

    /// The ONC RPC server refused the credentials.
    #[error("{call}: the server refused the credentials: {reason}")]
    AuthError {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// The server's reason.
        reason: lowlat_onc::AuthStat,
    },

    /// rpcbind could not say where the program is served.
    #[error("{uri}: rpcbind on {host} cannot say where program {program:#x} version {version} is: {detail}")]
    NotRegistered {
        /// The endpoint, as given to `connect`.
        uri: String,
        /// The host whose rpcbind was asked.
        host: String,
        /// The program number.
        program: u32,
        /// The program version.
        version: u32,
        /// What rpcbind or the connection to it said.
        detail: String,
    },

    /// The reply could not be parsed.
    #[error("{call}: malformed reply: {detail}")]
    MalformedReply {
        /// The endpoint and procedure the call was for.
        call: CallSite,
        /// What is wrong with it.
        detail: String,
    },

    /// A client over several servers found none to take the call: each refused it or is left
    /// out for now. The call ran nowhere.
    #[error("{uri}: no server took the call: {servers}")]
    NoServer {
        /// The endpoints, as given to `connect`.
        uri: String,
        /// What each server said, `URI: what` separated by `; `.
        servers: String,
    },

    /// A procedure was asked for by a name its program version does not have.
    #[error("program {program:#x} version {version} has no procedure named {name:?} (it has {known})")]
    NoSuchProcedure {
        /// The program number.
        program: u32,
        /// The program version.
        version: u32,
        /// The name asked for.
        name: String,
        /// The names the program version has, listed.
        known: String,
    },
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

/// The `call` field of the errors that are a call's (one list, for `call` and `call_mut`).
macro_rules! call_site_of {
    ($e:expr) => {
        match $e {
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
    };
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
        call_site_of!(self)
    }

    fn call_mut(&mut self) -> Option<&mut CallSite> {
        call_site_of!(self)
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

impl From<lowlat_addr::UriError> for Error {
    fn from(e: lowlat_addr::UriError) -> Error {
        Error::InvalidUri { uri: e.uri, reason: e.reason }
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
