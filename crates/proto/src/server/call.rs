//! A call as the server hands it out and takes it back: the key that names it
//! ([`CallKey`]), what the procedure is given ([`IncomingCall`]) and how it ended ([`Status`]).
//! Apart from the engine so that the connection state, the endpoint and a caller share them.

use crate::wire::{token, ByteOrder, ErrorCode};

/// Identifies a running call, to finish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallKey {
    /// The session's token.
    pub token: u64,
    /// The call's slot in the session.
    pub slot: u16,
    /// The call's number on its slot.
    pub call_no: u32,
}

impl CallKey {
    /// The index of the call's session among the server's sessions (below `max_sessions`,
    /// reused once the session is gone): for a caller that keeps something per session.
    pub fn session(&self) -> usize {
        token::session(self.token) as usize
    }
}

/// A call ready to run. `args` lies in the received frame (single-frame calls) or in the
/// slot's reassembly buffer; `reply` is the slot's result buffer, emptied.
#[derive(Debug)]
pub struct IncomingCall<'a> {
    /// Which call this is: hand it back to [`ServerEngine::finish`](super::ServerEngine::finish) with the outcome.
    pub key: CallKey,
    /// The program number (one the session was bound to).
    pub program: u32,
    /// The version bound.
    pub version: u32,
    /// The procedure number (unchecked: the caller knows its procedures).
    pub proc_no: u32,
    /// The byte order of the client (arguments arrive in the server's order; see `wire`).
    pub client_order: ByteOrder,
    /// The arguments, in the server's byte order (unvalidated).
    pub args: &'a [u8],
    /// Where the procedure writes its result, in the server's byte order (empty at the start).
    pub reply: &'a mut Vec<u8>,
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The result is in the reply buffer (or given to `finish_with`).
    Ok,
    /// The call failed; the reply buffer (or what is given to `finish_with`) holds the reason in
    /// UTF-8, or nothing.
    Error(ErrorCode),
}
