//! Same-machine transport for lowlat: per-binding call and result rings in a sealed memfd,
//! handed to the client over a Unix socket that stays open as the liveness channel.
//!
//! Layers, each usable alone: [`ring`] (a single-producer single-consumer message ring that a
//! hostile peer can only make report an error), [`segment`] (one binding's memfd: two rings),
//! [`ShmChannel`] (client) and [`ShmServer`] (one thread serving many bindings), [`pingpong`]
//! (the ring exchange with no RPC layer, and futex baselines) and [`floor`] (the machine's floor:
//! one message each way through cache lines, the sequence word written last, no ring).
//!
//! Messages are opaque bytes: this crate knows nothing of RPC headers.
//! Depends only on the OS and `lowlat-transport`'s wait strategy; never on the RPC runtime.

#![warn(missing_docs)]

pub mod channel;
pub mod error;
#[allow(unsafe_code)] // shared memory: the floor's mailboxes
pub mod floor;
pub mod pingpong;
#[allow(unsafe_code)] // shared memory: the rings
pub mod ring;
#[allow(unsafe_code)] // shared memory: the segment's layout
pub mod segment;
pub mod server;

pub use channel::{ChannelConfig, ShmChannel};
pub use error::ShmError;
pub use lowlat_transport::SpinPolicy;
pub use ring::RingError;
pub use segment::Layout;
pub use server::{Activity, BindingId, PeerCred, PeerPolicy, Reply, ShmHandler, ShmServer, ShmServerConfig};
