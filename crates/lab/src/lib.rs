//! lowlat's latency laboratory: the built-in `lab` interface, raw ping-pong baselines ([`raw`]:
//! the floors, built on the transports' public API so that no crate the runtime links carries
//! them), closed- and open-loop benchmarks recorded in HdrHistograms, and the `lab` run that
//! puts them side by side.
//!
//! Depends on the runtime, the transports and the test kit (its runs build test namespaces), and
//! on `lowlat-report` for the results it fills and renders. Used by the `lowlat` command (every
//! measuring subcommand and `lowlat lab`), by the Python package (`run_bench` and the lab
//! interface's procedure numbers) and by `lowlat-c`'s tests (a lab server to call). [`run_lab`]
//! starts its servers by running its own executable as `lowlat serve`, `lowlat pingpong` and
//! `lowlat workload`, so only the `lowlat` command can call it.
//!
//! It must never depend on the command line or the Python package, which depend on it; and no
//! crate that ships in users' programs (the runtime, the transports, `liblowlat`) may depend on
//! it: harnesses and floors live here so that shipped code carries none.

#![warn(missing_docs)]

pub mod account;
pub mod agent;
pub mod bench;
pub mod instructions;
pub mod interface;
pub mod ladder;
pub mod latency;
pub mod openloop;
pub mod pingpong;
pub mod procs;
pub mod raw;
pub mod run;
pub mod tasks;
pub mod workload;

pub use run::{run_lab, RemoteOptions};
