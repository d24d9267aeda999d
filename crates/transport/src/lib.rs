//! lowlat's socket transports: UDP datagrams and TCP streams, each a client channel and a
//! server endpoint, plus the allow-lists of networks a server admits ([`Cidr`]).
//!
//! This crate moves bytes: it knows nothing of RPC, sessions or call numbers, and must never
//! depend on the RPC protocol or runtime. It waits as every transport does (`lowlat-wait`) and
//! takes its addresses from `lowlat-addr`.

#![warn(missing_docs)]

pub mod allow;
pub mod tcp;
#[allow(unsafe_code)] // receiving into an initialised buffer through socket2
pub mod udp;

pub use allow::{Cidr, CidrError};
