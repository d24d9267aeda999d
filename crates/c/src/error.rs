//! Errors as negative codes, one per kind of [`runtime::Error`] a C program may want to tell
//! apart, and the message a Rust user would read, kept per thread for [`lowlat_last_error`].
//!
//! Nothing is recorded on success, so a successful call touches no thread-local state.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a function returning `int` returns: `LOWLAT_OK` (0), or a negative code saying what kind
/// of failure it was (then `lowlat_last_error()` says more).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum lowlat_status {
    /// Success.
    LOWLAT_OK = 0,
    /// A NULL pointer, a string that is not UTF-8, an out-of-range number or a call in the wrong
    /// state (adding a procedure to a serving server, say). Nothing was sent.
    LOWLAT_E_INVALID_ARGUMENT = -1,
    /// The URI could not be parsed.
    LOWLAT_E_INVALID_URI = -2,
    /// The URI's transport is not available in this build or on this machine.
    LOWLAT_E_UNSUPPORTED = -3,
    /// No server is running at the URI (connection or datagram refused); a call was not executed.
    LOWLAT_E_SERVER_NOT_RUNNING = -4,
    /// The server does not serve the program.
    LOWLAT_E_UNKNOWN_PROGRAM = -5,
    /// The server does not serve the program's version.
    LOWLAT_E_VERSION_MISMATCH = -6,
    /// The server speaks another version of lowlat's protocol or of ONC RPC.
    LOWLAT_E_PROTOCOL_MISMATCH = -7,
    /// The server has no room for another session.
    LOWLAT_E_TOO_MANY_SESSIONS = -8,
    /// The server refused the binding for another reason (see the message).
    LOWLAT_E_BIND_REFUSED = -9,
    /// No answer to the bind request in time.
    LOWLAT_E_BIND_TIMEOUT = -10,
    /// The call did not complete by its deadline; the message and
    /// `lowlat_last_error_may_have_executed` say whether it may have run.
    LOWLAT_E_TIMEOUT = -11,
    /// The server has no such procedure in the program and version.
    LOWLAT_E_UNKNOWN_PROCEDURE = -12,
    /// The server could not decode the arguments.
    LOWLAT_E_GARBAGE_ARGS = -13,
    /// The procedure failed on the server (it may have run).
    LOWLAT_E_SERVER_ERROR = -14,
    /// The server was overloaded and shed the call without running it.
    LOWLAT_E_BUSY = -15,
    /// The arguments or the result exceed the binding's maximum message size.
    LOWLAT_E_TOO_LARGE = -16,
    /// The connection broke during the call.
    LOWLAT_E_CONNECTION_LOST = -17,
    /// The server restarted during the call (it may have run before the restart).
    LOWLAT_E_SERVER_RESTARTED = -18,
    /// The server no longer knows the session.
    LOWLAT_E_SESSION_LOST = -19,
    /// The arguments could not be encoded (the encoder's message says why).
    LOWLAT_E_ENCODE = -20,
    /// The result could not be decoded (the decoder's message says why); the call has run.
    LOWLAT_E_DECODE = -21,
    /// The result is longer than the caller's buffer: the needed length is in `*result_len`, and
    /// nothing was copied. The call has run; its result is lost.
    LOWLAT_E_BUFFER_TOO_SMALL = -22,
    /// The server refused the call's credentials (ONC RPC), or the pre-shared keys of the two ends
    /// do not match (lowlat's protocol: one has none, or they differ).
    LOWLAT_E_AUTH = -23,
    /// rpcbind does not know where the program is (ONC RPC without a port).
    LOWLAT_E_NOT_REGISTERED = -24,
    /// The server's reply was malformed or carried an error this library does not know.
    LOWLAT_E_MALFORMED_REPLY = -25,
    /// A system call failed (see the message).
    LOWLAT_E_IO = -26,
    /// A defect in lowlat itself (a caught Rust panic); the message says where.
    LOWLAT_E_INTERNAL = -27,
    /// The batch holds as many calls as it has room for (submitted, and not yet returned by
    /// `lowlat_batch_poll`): poll some first. Nothing was sent.
    LOWLAT_E_BATCH_FULL = -28,
}

impl lowlat_status {
    /// Every status, for looking one up by its code.
    const ALL: [lowlat_status; 29] = [
        lowlat_status::LOWLAT_OK,
        lowlat_status::LOWLAT_E_INVALID_ARGUMENT,
        lowlat_status::LOWLAT_E_INVALID_URI,
        lowlat_status::LOWLAT_E_UNSUPPORTED,
        lowlat_status::LOWLAT_E_SERVER_NOT_RUNNING,
        lowlat_status::LOWLAT_E_UNKNOWN_PROGRAM,
        lowlat_status::LOWLAT_E_VERSION_MISMATCH,
        lowlat_status::LOWLAT_E_PROTOCOL_MISMATCH,
        lowlat_status::LOWLAT_E_TOO_MANY_SESSIONS,
        lowlat_status::LOWLAT_E_BIND_REFUSED,
        lowlat_status::LOWLAT_E_BIND_TIMEOUT,
        lowlat_status::LOWLAT_E_TIMEOUT,
        lowlat_status::LOWLAT_E_UNKNOWN_PROCEDURE,
        lowlat_status::LOWLAT_E_GARBAGE_ARGS,
        lowlat_status::LOWLAT_E_SERVER_ERROR,
        lowlat_status::LOWLAT_E_BUSY,
        lowlat_status::LOWLAT_E_TOO_LARGE,
        lowlat_status::LOWLAT_E_CONNECTION_LOST,
        lowlat_status::LOWLAT_E_SERVER_RESTARTED,
        lowlat_status::LOWLAT_E_SESSION_LOST,
        lowlat_status::LOWLAT_E_ENCODE,
        lowlat_status::LOWLAT_E_DECODE,
        lowlat_status::LOWLAT_E_BUFFER_TOO_SMALL,
        lowlat_status::LOWLAT_E_AUTH,
        lowlat_status::LOWLAT_E_NOT_REGISTERED,
        lowlat_status::LOWLAT_E_MALFORMED_REPLY,
        lowlat_status::LOWLAT_E_IO,
        lowlat_status::LOWLAT_E_INTERNAL,
        lowlat_status::LOWLAT_E_BATCH_FULL,
    ];

    /// The code a function returns.
    pub const fn code(self) -> c_int {
        self as c_int
    }

    fn name(self) -> &'static CStr {
        match self {
            lowlat_status::LOWLAT_OK => c"LOWLAT_OK",
            lowlat_status::LOWLAT_E_INVALID_ARGUMENT => c"LOWLAT_E_INVALID_ARGUMENT",
            lowlat_status::LOWLAT_E_INVALID_URI => c"LOWLAT_E_INVALID_URI",
            lowlat_status::LOWLAT_E_UNSUPPORTED => c"LOWLAT_E_UNSUPPORTED",
            lowlat_status::LOWLAT_E_SERVER_NOT_RUNNING => c"LOWLAT_E_SERVER_NOT_RUNNING",
            lowlat_status::LOWLAT_E_UNKNOWN_PROGRAM => c"LOWLAT_E_UNKNOWN_PROGRAM",
            lowlat_status::LOWLAT_E_VERSION_MISMATCH => c"LOWLAT_E_VERSION_MISMATCH",
            lowlat_status::LOWLAT_E_PROTOCOL_MISMATCH => c"LOWLAT_E_PROTOCOL_MISMATCH",
            lowlat_status::LOWLAT_E_TOO_MANY_SESSIONS => c"LOWLAT_E_TOO_MANY_SESSIONS",
            lowlat_status::LOWLAT_E_BIND_REFUSED => c"LOWLAT_E_BIND_REFUSED",
            lowlat_status::LOWLAT_E_BIND_TIMEOUT => c"LOWLAT_E_BIND_TIMEOUT",
            lowlat_status::LOWLAT_E_TIMEOUT => c"LOWLAT_E_TIMEOUT",
            lowlat_status::LOWLAT_E_UNKNOWN_PROCEDURE => c"LOWLAT_E_UNKNOWN_PROCEDURE",
            lowlat_status::LOWLAT_E_GARBAGE_ARGS => c"LOWLAT_E_GARBAGE_ARGS",
            lowlat_status::LOWLAT_E_SERVER_ERROR => c"LOWLAT_E_SERVER_ERROR",
            lowlat_status::LOWLAT_E_BUSY => c"LOWLAT_E_BUSY",
            lowlat_status::LOWLAT_E_TOO_LARGE => c"LOWLAT_E_TOO_LARGE",
            lowlat_status::LOWLAT_E_CONNECTION_LOST => c"LOWLAT_E_CONNECTION_LOST",
            lowlat_status::LOWLAT_E_SERVER_RESTARTED => c"LOWLAT_E_SERVER_RESTARTED",
            lowlat_status::LOWLAT_E_SESSION_LOST => c"LOWLAT_E_SESSION_LOST",
            lowlat_status::LOWLAT_E_ENCODE => c"LOWLAT_E_ENCODE",
            lowlat_status::LOWLAT_E_DECODE => c"LOWLAT_E_DECODE",
            lowlat_status::LOWLAT_E_BUFFER_TOO_SMALL => c"LOWLAT_E_BUFFER_TOO_SMALL",
            lowlat_status::LOWLAT_E_AUTH => c"LOWLAT_E_AUTH",
            lowlat_status::LOWLAT_E_NOT_REGISTERED => c"LOWLAT_E_NOT_REGISTERED",
            lowlat_status::LOWLAT_E_MALFORMED_REPLY => c"LOWLAT_E_MALFORMED_REPLY",
            lowlat_status::LOWLAT_E_IO => c"LOWLAT_E_IO",
            lowlat_status::LOWLAT_E_INTERNAL => c"LOWLAT_E_INTERNAL",
            lowlat_status::LOWLAT_E_BATCH_FULL => c"LOWLAT_E_BATCH_FULL",
        }
    }
}

pub use lowlat_status::*;

/// A failure on its way to C: the code a function returns and what [`lowlat_last_error`] says.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: lowlat_status,
    pub message: String,
    pub may_have_executed: bool,
}

impl Failure {
    pub fn new(code: lowlat_status, message: impl Into<String>, may_have_executed: bool) -> Failure {
        Failure { code, message: message.into(), may_have_executed }
    }

    /// A bad argument from the C caller: nothing was sent.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(LOWLAT_E_INVALID_ARGUMENT, message, false)
    }
}

/// The code of each kind of error.
fn code(e: &runtime::Error) -> lowlat_status {
    use runtime::Error as E;
    match e {
        E::InvalidUri { .. } => LOWLAT_E_INVALID_URI,
        E::Unsupported { .. } => LOWLAT_E_UNSUPPORTED,
        E::ServerNotRunning { .. } | E::NoServer { .. } => LOWLAT_E_SERVER_NOT_RUNNING,
        E::UnknownProgram { .. } => LOWLAT_E_UNKNOWN_PROGRAM,
        E::VersionMismatch { .. } => LOWLAT_E_VERSION_MISMATCH,
        E::ProtocolMismatch { .. } | E::RpcMismatch { .. } => LOWLAT_E_PROTOCOL_MISMATCH,
        E::TooManySessions { .. } | E::SourceLimit { .. } => LOWLAT_E_TOO_MANY_SESSIONS,
        E::BindRefused { .. } => LOWLAT_E_BIND_REFUSED,
        E::BindTimeout { .. } => LOWLAT_E_BIND_TIMEOUT,
        E::Timeout { .. } => LOWLAT_E_TIMEOUT,
        E::UnknownProcedure { .. } | E::NoSuchProcedure { .. } => LOWLAT_E_UNKNOWN_PROCEDURE,
        E::GarbageArgs { .. } => LOWLAT_E_GARBAGE_ARGS,
        E::ServerError { .. } => LOWLAT_E_SERVER_ERROR,
        E::Busy { .. } => LOWLAT_E_BUSY,
        E::TooLarge { .. } => LOWLAT_E_TOO_LARGE,
        E::ConnectionLost { .. } => LOWLAT_E_CONNECTION_LOST,
        E::ServerRestarted { .. } => LOWLAT_E_SERVER_RESTARTED,
        E::SessionLost { .. } => LOWLAT_E_SESSION_LOST,
        E::Encode { .. } => LOWLAT_E_ENCODE,
        E::Decode { source, .. } if source.is::<ResultTooLong>() => LOWLAT_E_BUFFER_TOO_SMALL,
        E::Decode { .. } => LOWLAT_E_DECODE,
        E::AuthError { .. } | E::KeyMismatch { .. } | E::UnauthenticatedRefusal { .. } | E::Encryption { .. } => {
            LOWLAT_E_AUTH
        }
        E::NotRegistered { .. } => LOWLAT_E_NOT_REGISTERED,
        E::MalformedReply { .. } | E::UnknownRemoteError { .. } => LOWLAT_E_MALFORMED_REPLY,
        E::Io { .. } | E::KeyFile { .. } => LOWLAT_E_IO,
        // `lowlat::Error` is non-exhaustive: a kind newer than this table reads as an I/O
        // failure until it gets a code of its own (its message still says what it is).
        _ => LOWLAT_E_IO,
    }
}

impl From<runtime::Error> for Failure {
    fn from(e: runtime::Error) -> Failure {
        Failure { code: code(&e), message: e.to_string(), may_have_executed: e.may_have_executed() }
    }
}

/// A result longer than the C caller's buffer (`lowlat_client_call`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResultTooLong {
    pub needed: usize,
    pub cap: usize,
}

impl std::fmt::Display for ResultTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the result is {} bytes, longer than the caller's buffer of {}; the call has executed and its result is lost",
            self.needed, self.cap
        )
    }
}

impl std::error::Error for ResultTooLong {}

/// What an encoder or decoder written in C said went wrong.
#[derive(Debug)]
pub(crate) struct CodecMessage(pub String);

impl std::fmt::Display for CodecMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecMessage {}

struct LastError {
    message: CString,
    may_have_executed: bool,
}

thread_local! {
    // Initialised on a thread's first failure (or first question about one).
    static LAST: RefCell<LastError> = RefCell::new(LastError { message: CString::default(), may_have_executed: false });
}

/// A message as a C string (a NUL in it written `\0`).
#[cold]
pub(crate) fn c_message(message: &str) -> CString {
    CString::new(message.replace('\0', "\\0")).unwrap_or_default()
}

/// Records `f` as this thread's last error and returns its code.
#[cold]
pub(crate) fn record(f: Failure) -> c_int {
    let message = c_message(&f.message);
    LAST.with(|l| *l.borrow_mut() = LastError { message, may_have_executed: f.may_have_executed });
    f.code.code()
}

/// Runs the body of an exported function: its failure, or a panic, becomes a code and this
/// thread's last error; no panic leaves the function.
#[inline]
pub(crate) fn guard(body: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    // The failure is recorded inside, so only a code leaves the unwinding boundary (cheaper to
    // move out than the whole result, on the path of every call).
    let run = || match body() {
        Ok(code) => code,
        Err(f) => record(f),
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(code) => code,
        Err(panic) => record(panicked(panic)),
    }
}

/// The failure a caught panic becomes.
pub(crate) fn panicked(panic: Box<dyn std::any::Any + Send>) -> Failure {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    Failure::new(LOWLAT_E_INTERNAL, format!("internal error in liblowlat (please report): {what}"), true)
}

/// The message of this thread's last failed lowlat call, as a Rust user would read it (the
/// endpoint, the procedure, whether it may have executed). Never NULL: `""` before any failure.
/// The string stays valid until the next failing lowlat call on this thread.
#[no_mangle]
pub extern "C" fn lowlat_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().message.as_ptr())
}

/// Whether the procedure of this thread's last failed call may have run: false only when lowlat
/// knows it did not (nothing was sent, the server refused it before running it, ...).
#[no_mangle]
pub extern "C" fn lowlat_last_error_may_have_executed() -> bool {
    LAST.with(|l| l.borrow().may_have_executed)
}

/// The name of an error code (`"LOWLAT_E_TIMEOUT"`), or `"LOWLAT_OK"`, or `"unknown"`. The
/// string is static.
#[no_mangle]
pub extern "C" fn lowlat_error_name(code: c_int) -> *const c_char {
    let name = lowlat_status::ALL.iter().find(|s| s.code() == code).map_or(c"unknown", |s| s.name());
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: lowlat_last_error returns this thread's message, valid until the next failure.
        unsafe { CStr::from_ptr(lowlat_last_error()) }.to_str().unwrap().to_string()
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let code = guard(|| panic!("the invariant broke"));
        assert_eq!(code, LOWLAT_E_INTERNAL.code());
        assert!(last().contains("the invariant broke"), "{}", last());
        assert!(lowlat_last_error_may_have_executed());
    }

    #[test]
    fn a_failure_is_recorded_per_thread_and_success_leaves_it_alone() {
        assert_eq!(guard(|| Err(Failure::invalid("uri is NULL"))), LOWLAT_E_INVALID_ARGUMENT.code());
        assert_eq!(guard(|| Ok(LOWLAT_OK.code())), LOWLAT_OK.code());
        assert_eq!(last(), "uri is NULL");
        assert!(!lowlat_last_error_may_have_executed());
        std::thread::spawn(|| assert_eq!(last(), "", "another thread has its own last error")).join().unwrap();
    }

    #[test]
    fn every_code_has_a_name() {
        for code in LOWLAT_E_BATCH_FULL.code()..=LOWLAT_OK.code() {
            // SAFETY: lowlat_error_name returns a static C string.
            let name = unsafe { CStr::from_ptr(lowlat_error_name(code)) }.to_str().unwrap();
            assert!(name.starts_with("LOWLAT_"), "code {code} is {name}");
        }
    }
}
