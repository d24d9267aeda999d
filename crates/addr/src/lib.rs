//! Where a lowlat peer is: the one parser of endpoint URIs ([`Endpoint`], every scheme) and of
//! Ethernet (MAC) addresses ([`Mac`]), shared by the transports, the runtime and the tools so
//! that a URI means the same everywhere.
//!
//! Plain values, parsed and printed: this crate opens nothing and must never depend on another
//! lowlat crate (every transport depends on it).

#![warn(missing_docs)]

pub mod endpoint;

pub use endpoint::{BadMac, Endpoint, Mac, UriError};
