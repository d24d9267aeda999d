//! Raw Ethernet transports for lowlat: AF_PACKET frames of lowlat's EtherType and AF_XDP sockets
//! with lowlat's own XDP program, plus the network-namespace test hosts used to exercise them.
//!
//! Depends only on the OS and `lowlat-transport`'s wait strategy; never on the RPC runtime.
//!
//! - [`packet`] (`eth://`): an AF_PACKET socket per channel, receiving through a PACKET_MMAP ring
//!   (measured faster than recv(2)), optionally narrowed by a classic-BPF filter ([`cbpf`]) to
//!   one call slot and peer; broadcast discovery of the server.
//! - [`xdp`] (`xdp://`): an AF_XDP socket with UMEM and four rings, zero-copy when the driver
//!   allows, and lowlat's XDP program ([`bpf`], hand-assembled, loaded with bpf(2), attached
//!   with a bpf link); [`shared`] lets several threads use the one socket a queue allows.
//! - [`frame`]: the frame layout (Ethernet header, 4-byte shim, payload, CRC32C).
//! - [`pingpong`] and [`ladder`]: raw ping-pong, the XDP floor (an echo program answering in
//!   the driver), and measurements across [`testhosts`] (two namespaces joined by veth).
//! - [`fault`]: an XDP program that corrupts frames, to exercise checksums and retransmission.

#![warn(missing_docs)]

#[allow(unsafe_code)] // the bpf(2) system call
pub mod bpf;
pub mod cbpf;
pub mod error;
pub mod fault;
pub mod frame;
#[allow(unsafe_code)] // interface ioctls
pub mod ifinfo;
pub mod ladder;
#[allow(unsafe_code)] // AF_PACKET and its ring shared with the kernel
pub mod packet;
pub mod pingpong;
pub mod shared;
pub mod socket;
#[allow(unsafe_code)] // setns(2) and kill(2) of the watcher
pub mod testhosts;
#[allow(unsafe_code)] // AF_XDP and its rings shared with the kernel
pub mod xdp;

pub use cbpf::Filter;
pub use error::{Error, Result};
pub use lowlat_transport::Mac;
pub use packet::{EthConfig, EthSocket};
pub use socket::{FrameSocket, OpenOptions};
pub use xdp::{XdpConfig, XdpSocket};
