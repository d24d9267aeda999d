//! What a failed call means to its caller: the engine's and the server's outcomes as [`Error`]s
//! naming the endpoint and the procedure. Off the call path: every function is cold.

use lowlat_proto::{CallError, ErrorCode, Execution, WireError};

use super::lowlat::Lowlat;
use crate::{CallSite, Error};

impl Lowlat {
    /// Where a call of `proc_no` goes, as errors name it (without the procedure's name, which
    /// [`Client`] adds).
    #[cold]
    pub(super) fn site(&self, proc_no: u32) -> CallSite {
        let s = &self.shared;
        CallSite { uri: s.uri.clone(), program: s.program, version: s.version, proc_no, name: None }
    }

    #[cold]
    pub(super) fn lost(&self, proc_no: u32, execution: Execution, source: std::io::Error) -> Error {
        Error::ConnectionLost { call: self.site(proc_no), execution, source }
    }

    #[cold]
    pub(super) fn decode_error<E: std::error::Error + Send + Sync + 'static>(&self, proc_no: u32, e: E) -> Error {
        Error::Decode { call: self.site(proc_no), source: Box::new(e) }
    }

    #[cold]
    pub(super) fn call_error(&self, proc_no: u32, e: CallError) -> Error {
        let call = self.site(proc_no);
        match e {
            CallError::Timeout { after, execution } => Error::Timeout { call, after, execution },
            CallError::TooLarge { size, max } => Error::TooLarge { call, size: Some(size), max: max as usize },
            CallError::SessionLost { restarted: true, retry_safe: false } => Error::ServerRestarted { call },
            CallError::SessionLost { retry_safe, .. } => {
                Error::SessionLost { call, execution: if retry_safe { Execution::NotSent } else { Execution::Unknown } }
            }
        }
    }

    /// The server's own error, with its reason when it gave one.
    #[cold]
    pub(super) fn remote_error(&self, proc_no: u32, code: ErrorCode, message: Result<&str, WireError>) -> Error {
        let call = self.site(proc_no);
        let message = match message {
            Ok("") => None,
            Ok(m) => Some(m.to_string()),
            Err(e) => Some(format!("(the server's reason was unreadable: {e})")),
        };
        match code {
            ErrorCode::UnknownProcedure => Error::UnknownProcedure { call },
            ErrorCode::GarbageArgs => Error::GarbageArgs { call, detail: message },
            ErrorCode::ServerError => Error::ServerError { call, message },
            ErrorCode::Busy => Error::Busy { call, message },
            ErrorCode::TooLarge => Error::TooLarge { call, size: None, max: self.session().max_message as usize },
            ErrorCode::UnknownSession => Error::SessionLost { call, execution: Execution::Unknown },
            ErrorCode::Unknown(code) => Error::UnknownRemoteError { call, code, message },
        }
    }

    /// Every slot stayed busy until the call's deadline: it was never sent.
    #[cold]
    pub(super) fn no_slot(&self, proc_no: u32, after: std::time::Duration) -> Error {
        Error::Timeout { call: self.site(proc_no), after, execution: Execution::NotSent }
    }
}
