//! How a call ends when it does not simply return its result: the engine's own failures
//! ([`CallError`], with what is known of whether the procedure ran: [`Execution`]) and the
//! server's ([`Outcome::Remote`]). Kept apart because every layer above reports them.

use core::time::Duration;

use crate::wire::{ErrorCode, WireError};

/// What is known, when a call fails, about whether the procedure ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// Nothing of the call left the client.
    NotSent,
    /// The call was sent but nothing came back: it may or may not have run.
    Unknown,
    /// The server acknowledged the call (it may have finished running).
    Started,
}

impl core::fmt::Display for Execution {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Execution::NotSent => "the call was never sent, so it did not execute",
            Execution::Unknown => "the server never answered, so the call may or may not have executed",
            Execution::Started => "the server had received the call, so it may have executed",
        })
    }
}

/// Why a call failed in the engine (the server's own errors are [`Outcome::Remote`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The per-call deadline passed.
    Timeout {
        /// How long the call waited.
        after: Duration,
        /// Whether the procedure may have run.
        execution: Execution,
    },
    /// The server does not know the session. `restarted`: its generation changed.
    /// `retry_safe`: the call was refused on its first transmission by the same server
    /// incarnation, so it never ran and may be sent again on a new session.
    SessionLost {
        /// The server restarted (its generation changed) rather than expiring the session.
        restarted: bool,
        /// The call never ran and may be sent again on a new session.
        retry_safe: bool,
    },
    /// The arguments exceed the session's maximum message size.
    TooLarge {
        /// Bytes of the arguments.
        size: usize,
        /// The session's maximum message, in bytes.
        max: u32,
    },
}

/// The result of feeding a frame to a busy slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// The call completed; the result body (in the frame where it lies, or reassembled).
    Reply(&'a [u8]),
    /// The call failed.
    Failed(CallError),
    /// The server answered with an error, and why in its own words (`Ok("")` when it gave no
    /// reason; an `Err` when the reason it sent was malformed: too long, or not UTF-8).
    Remote {
        /// The server's code.
        code: ErrorCode,
        /// The server's reason, checked.
        message: Result<&'a str, WireError>,
    },
}
