//! Same-machine transport for lowlat: per-binding call and result rings in a sealed memfd,
//! handed to the client over a Unix socket that stays open as the liveness channel.
//!
//! Depends only on the OS and `lowlat-transport`'s wait strategy; never on the RPC runtime.
