//! Same-machine transport for lowlat: per-connection call and result rings in a sealed memfd,
//! handed to the client over a Unix socket that stays open as the liveness channel.
//!
//! Layers, each usable alone: [`ring`] (a single-producer single-consumer message ring that a
//! hostile peer can only make report an error), [`segment`] (one connection's memfd: two rings),
//! [`ShmChannel`] (client) and [`ShmServer`] (one thread serving many connections), and
//! [`listen`] (the socket file a listener answers at, also used by the laboratory's floor).
//!
//! Messages are opaque bytes: this crate knows nothing of RPC headers. It ships in the runtime,
//! so it holds no laboratory: raw ping-pong over the rings and the machine's floor live in
//! `lowlat-lab`. Depends only on the OS (`lowlat-sys`) and the shared waiting policy
//! (`lowlat-wait`); never on the RPC runtime, the laboratory or the test kit.

#![warn(missing_docs)]

pub mod channel;
pub mod error;
pub mod listen;
#[allow(unsafe_code)] // shared memory: the rings
pub mod ring;
#[allow(unsafe_code)] // shared memory: the segment's layout
pub mod segment;
pub mod server;

pub use channel::{ChannelConfig, ShmChannel};
pub use error::ShmError;
pub use lowlat_wait::SpinPolicy;
pub use ring::RingError;
pub use segment::Layout;
pub use server::{Activity, ConnectionId, PeerCred, PeerPolicy, Reply, ShmHandler, ShmServer, ShmServerConfig};
