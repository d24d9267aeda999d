//! lowlat's latency laboratory: the built-in `lab` interface, raw ping-pong baselines, closed-loop
//! benchmarks recorded in HdrHistograms, and the `lab` run that puts them side by side.
//!
//! Depends on the runtime and the transports; nothing depends on it but the command line.

pub mod interface;
