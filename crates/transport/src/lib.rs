//! lowlat's socket transports and the waiting policy all transports share.
//!
//! This crate moves bytes: it knows nothing of RPC, sessions or call numbers. It also holds the
//! one parser of endpoint URIs and MAC addresses every crate uses ([`Endpoint`], [`Mac`]). Every transport
//! waits the same way ([`wait::Spinner`]: spin, then block), so RPC and raw ping-pong over one
//! transport are compared like for like.

#![warn(missing_docs)]

pub mod allow;
pub mod endpoint;
pub mod tcp;
#[allow(unsafe_code)] // receiving into an initialised buffer through socket2
pub mod udp;
pub mod wait;

pub use allow::{Cidr, CidrError};
pub use endpoint::{BadMac, Endpoint, Mac, UriError};
pub use wait::{SpinPolicy, Spinner};
