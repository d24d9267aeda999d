//! lowlat's errors as the Python exceptions of `lowlat/errors.py`: the same message a Rust user
//! reads, the class by what went wrong, and whether the procedure may have run.

use lowlat::Error as Call;
use lowlat_dynamic::Error as Dynamic;
use pyo3::prelude::*;

/// The exception of `lowlat.errors` named `class`, with `message`.
fn raise(py: Python<'_>, class: &str, message: String, may_have_executed: bool) -> PyErr {
    let made = py
        .import("lowlat.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message.clone(), may_have_executed)));
    match made {
        Ok(e) => PyErr::from_value(e),
        // The package is broken (errors.py missing): still say what happened.
        Err(e) => pyo3::exceptions::PyRuntimeError::new_err(format!("{message} (and lowlat.errors failed: {e})")),
    }
}

/// The class of a call's error. `lowlat::Error` is non-exhaustive: a kind newer than this table
/// is raised as the base class `Error` until it is placed (its message still says what it is).
fn call_class(e: &Call) -> &'static str {
    match e {
        Call::Timeout { .. } | Call::BindTimeout { .. } => "TimeoutError",
        Call::ServerNotRunning { .. } | Call::NoServer { .. } => "ServerNotRunningError",
        Call::ConnectionLost { .. } | Call::SessionLost { .. } | Call::ServerRestarted { .. } => "ConnectionLostError",
        Call::UnknownProcedure { .. } | Call::NoSuchProcedure { .. } => "UnknownProcedureError",
        Call::GarbageArgs { .. } | Call::TooLarge { .. } | Call::Encode { .. } => "BadArgumentsError",
        Call::ServerError { .. }
        | Call::Busy { .. }
        | Call::UnknownRemoteError { .. }
        | Call::MalformedReply { .. }
        | Call::Decode { .. } => "ServerError",
        Call::InvalidUri { .. }
        | Call::Unsupported { .. }
        | Call::UnknownProgram { .. }
        | Call::VersionMismatch { .. }
        | Call::ProtocolMismatch { .. }
        | Call::TooManySessions { .. }
        | Call::BindRefused { .. }
        | Call::RpcMismatch { .. }
        | Call::AuthError { .. }
        | Call::SourceLimit { .. }
        | Call::KeyMismatch { .. }
        | Call::UnauthenticatedRefusal { .. }
        | Call::Encryption { .. }
        | Call::NotRegistered { .. } => "BindError",
        Call::Io { .. } | Call::KeyFile { .. } => "Error",
        _ => "Error",
    }
}

/// A binding's or a call's error.
pub fn call_error(py: Python<'_>, e: Call) -> PyErr {
    raise(py, call_class(&e), e.to_string(), e.may_have_executed())
}

/// An error of the dynamic client: the interface, the arguments, the result, or the call.
pub fn dynamic_error(py: Python<'_>, e: Dynamic) -> PyErr {
    let (class, may_have_executed) = match &e {
        Dynamic::Call(c) => (call_class(c), c.may_have_executed()),
        Dynamic::Idl(_) | Dynamic::Read { .. } | Dynamic::Selection(_) => ("InterfaceError", false),
        Dynamic::UnknownProcedure { .. } | Dynamic::Ambiguous { .. } => ("UnknownProcedureError", false),
        Dynamic::Json(_) | Dynamic::Value { .. } => ("BadArgumentsError", false),
        // Only a result is decoded on the client: the procedure ran.
        Dynamic::Decode { .. } => ("ServerError", true),
    };
    raise(py, class, e.to_string(), may_have_executed)
}
