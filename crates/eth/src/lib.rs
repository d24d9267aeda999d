//! Raw Ethernet transports for lowlat: AF_PACKET frames of lowlat's EtherType and AF_XDP sockets
//! with lowlat's own XDP program.
//!
//! It ships in the runtime, so it holds no laboratory and no test harness: raw ping-pong, the
//! XDP floor, the ladder and the frame corruptor live in `lowlat-lab`, the network-namespace
//! test hosts in `lowlat-testkit`; they build on the public [`bpf`], [`ifinfo`] and
//! [`FrameSocket`] below. Depends only on the OS (`lowlat-sys`), the shared waiting policy
//! (`lowlat-wait`), addresses (`lowlat-addr`) and where the lowlat header's fields lie
//! (`lowlat-proto`'s wire format); never on the RPC runtime, the laboratory or the test kit.
//!
//! - [`packet`] (`eth://`): an AF_PACKET socket per channel, receiving through a PACKET_MMAP ring
//!   (measured faster than recv(2)), optionally narrowed by a classic-BPF filter ([`cbpf`]) to
//!   one call slot and peer; broadcast discovery of the server.
//! - [`xdp`] (`xdp://`): an AF_XDP socket with UMEM and four rings, zero-copy when the driver
//!   allows, and lowlat's XDP program ([`bpf`], hand-assembled, loaded with bpf(2), attached
//!   with a bpf link); [`shared`] lets several threads use the one socket a queue allows.
//! - [`frame`]: the frame layout (Ethernet header, 4-byte shim, payload, CRC32C).

#![warn(missing_docs)]

#[allow(unsafe_code)] // bpf(2) attribute blocks, whose addresses only this module can vouch for
pub mod bpf;
pub mod cbpf;
pub mod error;
pub mod frame;
pub mod ifinfo;
#[allow(unsafe_code)] // AF_PACKET and its ring shared with the kernel
pub mod packet;
pub mod shared;
pub mod socket;
#[allow(unsafe_code)] // AF_XDP and its rings shared with the kernel
pub mod xdp;

pub use cbpf::Filter;
pub use error::{Error, Result};
pub use lowlat_addr::Mac;
pub use packet::{EthConfig, EthSocket};
pub use socket::{FrameSocket, OpenOptions};
pub use xdp::{XdpConfig, XdpSocket};
