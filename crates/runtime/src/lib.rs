//! lowlat: remote procedure calls for Linux whose fast path runs close to what the machine can do.
//!
//! A lowlat program starts from an interface in the ONC RPC language (a `.x` file, as rpcgen
//! reads it):
//!
//! ```text
//! struct item { string name<16>; unsigned int count; };
//! program INVENTORY_PROG {
//!     version INVENTORY_V1 {
//!         unsigned int ADD(item) = 1;
//!     } = 1;
//! } = 0x20001234;
//! ```
//!
//! `lowlat-build` compiles it in `build.rs` (`lowlat_build::compile("inventory.x")`) into a
//! module of types (`Item`), a client (`inventory_v1::InventoryV1Client`, one method per
//! procedure) and a service trait (`inventory_v1::InventoryV1Service`) with `program` (lowlat's
//! native encoding) and `program_xdr` (XDR, for ONC RPC callers) to serve an implementation:
//!
//! ```ignore
//! impl InventoryV1Service for Shelves {
//!     fn add(&self, _: &lowlat::CallContext, it: Item) -> Result<u32, lowlat::ProcError> {
//!         Ok(self.stock(it.name, it.count))
//!     }
//! }
//! let shelves = std::sync::Arc::new(Shelves::default());
//! let server = lowlat::Server::builder()
//!     .program(inventory_v1::program(shelves.clone()))
//!     .program(inventory_v1::program_xdr(shelves))
//!     .serve(&["udp://127.0.0.1:7000", "shm:///tmp/inventory.sock", "onc+udp://127.0.0.1:7001"])?;
//! let client = InventoryV1Client::connect("shm:///tmp/inventory.sock")?; // Send + Sync: share it
//! let in_stock = client.add(&Item { name: "hammer".into(), count: 3 })?;
//! // Per-call options: a deadline for this call only.
//! let patient = client.with(lowlat::CallOptions::new().deadline(std::time::Duration::from_secs(5)));
//! ```
//!
//! `examples/inventory` in the repository is that project complete (built and run by the tests),
//! and `docs/onc-example.md` walks through it; `lowlat-build`'s front page documents the
//! generated API (names, how each `.x` construct maps to Rust). Without a `.x`, a procedure is a
//! closure over bytes, which is what generated stubs amount to:
//!
//! ```no_run
//! use lowlat::{Client, Program, Server};
//! // Serve program 0x20000001 version 1 with one procedure that adds 1 to a little-endian u32.
//! let program = Program::new(0x2000_0001, 1).procedure(1, "INC", |_ctx, args, reply| {
//!     let n = u32::from_le_bytes(args.try_into().map_err(|_| lowlat::ProcError::GarbageArgs)?);
//!     reply.extend_from_slice(&(n + 1).to_le_bytes());
//!     Ok(())
//! });
//! let server = Server::builder().program(program).serve(&["udp://127.0.0.1:7000"]).unwrap();
//! let client = Client::connect("udp://127.0.0.1:7000", 0x2000_0001, 1).unwrap();
//! let n = client
//!     .call(1, |a| Ok::<_, lowlat::DecodeError>(a.extend_from_slice(&41u32.to_le_bytes())), |r| {
//!         Ok(u32::from_le_bytes(r.try_into().map_err(|_| lowlat::DecodeError::new("u32", r.len()))?))
//!     })
//!     .unwrap();
//! assert_eq!(n, 42);
//! server.shutdown();
//! ```
//!
//! # Async calls and async procedures
//!
//! Every call of [`Client`] has a future twin ([`Client::call_async`],
//! [`Client::call_with_async`]), and so has every generated method (`minus_async`): any
//! executor can await them (tokio, a hand-rolled `block_on`); lowlat needs no runtime of its
//! own. A call is sent when it is made, if a slot is free, so calls made one after another are
//! in flight together before any is awaited; its future is `Unpin`. Each poll looks once for the
//! reply; finding none, the future asks to be polled again (its executor runs the other tasks
//! first: tasks on one executor take turns and their calls overlap) while the client keeps
//! making progress within the binding's spin budget, and otherwise parks in lowlat's reactor
//! thread (one per process, epoll on the call slot's socket; over `shm://` on an eventfd the
//! server rings for a parked client), leaving the executor's thread free; a call that completes
//! wakes the parked calls of its client whose replies are there. One client carries as many
//! calls at once as it has slots ([`ClientConfig::slots`], 64 by default); more wait in line for
//! a slot, woken in turn when one is given back, within their deadline. A future dropped before
//! it completes frees its slot at once (its call abandoned: it may have executed, and a late
//! reply is ignored). Opening a slot's channel and binding again after a server restart still
//! happen within one poll (they block it for a round trip).
//!
//! Blocking code keeps many calls in flight without an executor: [`wait_all`] runs a list of
//! calls made with the `*_async` methods to their ends on the calling thread, and [`InFlight`]
//! keeps a window of them, reporting each as it completes (`lowlat bench --in-flight W`).
//!
//! On the server, [`Program::procedure_async`] adds a procedure whose body is a future: polled
//! on the thread that received the call, answered at once if ready, otherwise set aside while
//! the thread serves other calls, and polled again when its waker rings the endpoint's doorbell.
//! Graceful stops wait for such calls as for any call in progress.
//! `crates/runtime/examples/async_null.rs` measures the async null call beside the blocking one.
//!
//! The public API is [`Client`] (a binding, shared by threads), [`Server`] with [`Program`]s of
//! procedures, their configurations and [`Error`]. A server gives strangers nothing before they
//! prove they receive at their address (a cookie round on datagram transports), bounds what one
//! source may hold, and with a pre-shared key ([`ServerConfig::psk`], [`ClientConfig::psk`],
//! [`read_psk_file`]) authenticates binds and every frame; [`Server::stats`],
//! [`Client::stats`] and the [`stats`] module say what a server endpoint and a binding did, and
//! [`metrics`] puts the same where Prometheus reads it ([`ServerBuilder::metrics`]).
//!
//! # Logs and spans
//!
//! lowlat reports through [`tracing`](https://docs.rs/tracing) and never installs a subscriber:
//! install your own (`tracing_subscriber::fmt().init()`, an OpenTelemetry layer) and lowlat's
//! events reach it; without one nothing is written, or even formatted. No event is emitted per
//! call, so a subscriber at INFO leaves a call's path as it was (no allocation, one relaxed load
//! per call site a subscriber does not want). The events, each with its fields:
//!
//! | target           | level | when | fields |
//! |------------------|-------|------|--------|
//! | `lowlat::server` | ERROR | a serving thread's socket failed: the endpoint serves no more | `endpoint`, `reason` |
//! | `lowlat::onc`    | WARN  | an ONC RPC call failed with a reason (ONC RPC cannot carry it to the caller); at most ten a second per endpoint, the rest counted in `suppressed` | `endpoint`, `peer`, `program`, `version`, `procedure`, `name`, `outcome`, `reason` |
//! | `lowlat::onc`    | WARN  | rpcbind refused a registration, or could not be asked | `program`, `version`, `at`, `reason` |
//! | `lowlat::tcp`    | WARN  | a TCP connection refused or closed by the limits ([`ServerConfig::allow`], [`ServerConfig::max_connections`], ...); at most one of each kind every 10 s | `endpoint`, `peer`, `max`, `at_most_every_s` |
//!
//! With [`ClientConfig::spans`] or [`ServerConfig::spans`] on, each call runs in a span named
//! `call` (target `lowlat::client`; on the server `lowlat::server`, or `lowlat::onc`), with the
//! program, version, procedure number and name, and lowlat's session token, slot and call
//! number (over ONC RPC, the server's span has the xid), so that a pipeline can attach a
//! client's call to the server's. The server's span is entered wherever the procedure runs:
//! the serving thread, a worker, each poll of an async procedure's future; events the procedure
//! emits are inside it. Off by default: the call path then looks at the flag and does nothing.
//!
//! Inside: a client's calls take slots from one pool (`client::pool`), whatever the protocol and
//! whether they block or are awaited; a server's calls reach procedures through one dispatcher
//! per endpoint (`serving::dispatch`). Underneath: `lowlat-proto` and `lowlat-onc` (the sans-I/O
//! protocol engines), `lowlat-transport`, `lowlat-shm` and `lowlat-eth` (the transports),
//! `lowlat-wait` (the spin-then-block wait) and `lowlat-sys` (the system calls). This crate must
//! never depend on the lab, the CLI or any code generator.

#![warn(missing_docs)]

mod client;
mod config;
mod doorbell;
mod driver;
mod error;
mod in_flight;
mod marks;
pub mod metrics;
mod program;
mod reactor;
mod server;
mod serving;
mod spans;
pub mod stats;
pub mod trace;
mod waiting;

pub use client::spread::ServerStats;
pub use client::Client;
pub use config::{read_psk_file, CallOptions, ClientConfig, ServerConfig, MAX_SERVING_THREADS};
pub use doorbell::Drained;
pub use error::{CallSite, Error, KeyMismatch};
pub use in_flight::{wait, wait_all, InFlight};
pub use lowlat_addr::{Endpoint, Mac};
/// The encoding library generated stubs use (`lowlat-build`'s default codec path).
pub use lowlat_codec as codec;
pub use lowlat_codec::{DecodeError, OutBuf};
pub use lowlat_onc::{AuthStat, AuthSys};
pub use lowlat_proto::{ByteOrder, ClientEngineConfig, Execution, Psk, Session, MAX_ERROR_MESSAGE};
pub use lowlat_transport::Cidr;
pub use lowlat_wait::SpinPolicy;
pub use program::{CallContext, Handler, ProcError, Program};
pub use server::{Server, ServerBuilder};
pub use stats::{ClientStats, EndpointStats};
