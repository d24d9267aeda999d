//! lowlat's latency laboratory: the built-in `lab` interface, raw ping-pong baselines, closed- and
//! open-loop benchmarks recorded in HdrHistograms, and the `lab` run that puts them side by side.
//!
//! Depends on the runtime and the transports; nothing depends on it but the command line.

#![warn(missing_docs)]

pub mod account;
pub mod bench;
pub mod interface;
pub mod ladder;
pub mod openloop;
pub mod pingpong;
pub mod procs;
pub mod run;
pub mod stats;
pub mod workload;

pub use run::run_lab;
