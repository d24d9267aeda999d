//! ONC RPC version 2 (RFC 5531) for lowlat: the pieces a runtime needs to speak to rpcgen/libtirpc
//! clients and servers and to rpcbind.
//!
//! * [`msg`]: call and reply headers (accepted and denied, every status), parsed from and written
//!   to caller-owned buffers, never panicking on hostile input.
//! * [`auth`]: AUTH_NONE and AUTH_SYS credentials, AUTH_SYS held in a fixed-size value so a
//!   server can hand it to a procedure without allocating.
//! * [`record`]: TCP record marking (RFC 5531 §11), multi-fragment records and a maximum size.
//! * [`drc`]: the duplicate-request cache a UDP server needs so a retransmitted call runs once.
//! * [`engine`]: the sans-I/O engine: a client's call slot (xids, retransmission, deadline) and a
//!   server's decisions (duplicate-request cache, credential policy, the replies it builds).
//! * [`rpcbind`]: a blocking rpcbind client (GETADDR v4/v3 falling back to PMAPPROC_GETPORT v2;
//!   SET and UNSET for registration).
//!
//! Everything but [`rpcbind`] is sans-I/O. This crate depends on nothing but `thiserror` and must
//! never depend on the lowlat runtime, its protocol engine or the code generator.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod drc;
pub mod engine;
pub mod error;
pub mod msg;
pub mod record;
pub mod rpcbind;
mod xdr;

pub use auth::{AuthStat, AuthSys, Credential, CredentialIn};
pub use drc::{DuplicateCache, Lookup};
pub use engine::{CallError, ClientSlot, ClientSlotConfig, Outcome, ServerEngine, ServerEngineConfig};
pub use error::{Error, RecordError};
pub use msg::{AcceptStatus, Call, CallHeader, RejectStatus, Reply, ReplyBody};
pub use record::{frame_record, RecordReader};

/// The ONC RPC protocol version this crate speaks.
pub const RPC_VERSION: u32 = 2;
