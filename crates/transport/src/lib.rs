//! lowlat's socket transports and the waiting policy all transports share.
//!
//! This crate moves bytes: it knows nothing of RPC, sessions or call numbers. Every transport
//! waits the same way ([`wait::Spinner`]: spin, then block), so RPC and raw ping-pong over one
//! transport are compared like for like.

pub mod allow;
pub mod sys;
pub mod tcp;
pub mod udp;
pub mod wait;

pub use allow::{Cidr, CidrError};
pub use wait::{SpinPolicy, Spinner};
