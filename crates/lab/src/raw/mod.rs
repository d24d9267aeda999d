//! Raw exchanges with no RPC layer, the floors every RPC figure is judged by: ping-pong over the
//! shared-memory rings and over raw Ethernet, the XDP floor (an echo program answering in the
//! driver), the machine's shared-memory floor (cache lines, no ring) and its pipelined form
//! (rings of one-line records), raw Ethernet exchanges across two test namespaces
//! ([`eth_hosts`]), and an XDP program that corrupts frames ([`fault`]).
//!
//! Built on the transports' public API alone, so that the crates the runtime links carry no
//! laboratory.

pub mod cpu_report;
pub mod eth_hosts;
pub mod eth_pingpong;
pub mod fault;
#[allow(unsafe_code)] // memory shared with another process: the floor's mailboxes
pub mod shm_floor;
#[allow(unsafe_code)] // memory shared with another process: the pipelined floor's rings
pub mod shm_floor_ring;
pub mod shm_pingpong;
pub mod udp_floor;
