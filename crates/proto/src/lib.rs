//! lowlat's protocol engine, with no I/O: it is fed frames and the current time, and it returns
//! frames to send (through a callback given a header and a body), events, and its next timer.
//!
//! - [`wire`]: the fixed 32-byte header and the handshake payloads.
//! - [`auth`]: bind cookies, path challenges, the pre-shared key and the per-session frame tags.
//! - [`seal`]: encrypted frames (AEAD) on sessions that ask for them.
//! - [`client`]: binding ([`Binder`]) and call slots ([`ClientSlot`]) with retransmission.
//! - [`server`]: sessions, at-most-once execution, duplicate suppression ([`ServerEngine`]).
//! - [`frag`]: windowed fragmentation with selective retransmission.
//! - [`rtt`]: retransmission timeouts from measured round trips.
//!
//! Because nothing here touches a socket or a clock, loss, duplication, reordering and timeouts
//! are tested deterministically in virtual time (`tests/sim.rs`). This crate must never depend on
//! a transport, an async runtime or the operating system.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod client;
pub mod frag;
pub mod rtt;
pub mod seal;
pub mod server;
pub mod wire;

pub use auth::{FrameKeys, Psk, PskError};
pub use client::{BindError, Binder, Bound, CallError, ClientEngineConfig, ClientSlot, Execution, Outcome, Session};
pub use seal::{CipherKind, SEALED_HEAD_LEN};
pub use server::{
    CallKey, Census, IncomingCall, ProgramVersions, Refusals, ServerEngine, ServerEngineConfig, ServerStats, Shard,
    Status,
};
pub use wire::{
    ByteOrder, ErrorCode, ErrorMessage, Header, Kind, Refusal, WholeCall, WireError, HEADER_LEN, MAX_ERROR_MESSAGE,
    TAG_LEN,
};

/// Largest number of fragments in flight (one acknowledgement bitmap's worth).
pub const MAX_WINDOW: u16 = 64;
