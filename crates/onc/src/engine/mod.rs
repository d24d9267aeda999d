//! The ONC RPC engine, with no I/O: lowlat's protocol engine (`lowlat-proto`) in the shape of
//! ONC RPC v2. It is fed messages and the current time, and it returns messages to send (through
//! a callback given a header and a body, sent as one message), events, and its next timer.
//!
//! - [`client`]: one call slot ([`ClientSlot`]): xid allocation and matching, retransmission with
//!   back-off until a deadline, and an outcome that says whether a failed call may have run.
//! - [`server`]: [`ServerEngine`]: the duplicate-request cache, credential policy and every reply
//!   a server builds itself (denials, unknown program, version mismatch).
//!
//! A message here is a whole ONC RPC message: cutting a byte stream into records (RFC 5531 §11)
//! is the transport's business ([`crate::record`]). Nothing here reads a clock, touches a socket
//! or draws randomness (the first xid comes from a seed in the configuration), so loss,
//! duplication, reordering and deadlines are tested deterministically in virtual time
//! (`tests/sim.rs`).

pub mod client;
pub mod server;

pub use client::{CallError, ClientSlot, ClientSlotConfig, Outcome};
pub use server::{CallKey, IncomingCall, ServerEngine, ServerEngineConfig, ServerStats};
