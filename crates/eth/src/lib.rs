//! Raw Ethernet transports for lowlat: AF_PACKET frames of lowlat's EtherType and AF_XDP sockets
//! with lowlat's own XDP program, plus the network-namespace test hosts used to exercise them.
//!
//! Depends only on the OS and `lowlat-transport`'s wait strategy; never on the RPC runtime.

pub mod bpf;
pub mod cbpf;
pub mod error;
pub mod fault;
pub mod frame;
pub mod ifinfo;
pub mod ladder;
pub mod mac;
pub mod packet;
pub mod pingpong;
pub mod shared;
pub mod socket;
pub mod testhosts;
pub mod uri;
pub mod xdp;

pub use cbpf::Filter;
pub use error::{Error, Result};
pub use mac::Mac;
pub use packet::{EthConfig, EthSocket};
pub use socket::{FrameSocket, OpenOptions};
pub use uri::{Endpoint, Scheme};
pub use xdp::{XdpConfig, XdpSocket};
