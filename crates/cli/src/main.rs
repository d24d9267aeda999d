//! The `lowlat` command: serve, call, benchmark, measure the floor, run the laboratory (here, or
//! across two hosts with `lowlat agent` on the second).
//!
//! Here are the top-level parser and the dispatch; each subcommand, with its arguments and its
//! `run`, is a module of `cmd`. The work is the libraries': the runtime serves and calls,
//! `lowlat-dynamic` calls any `.x` interface, `lowlat-lab` measures, `lowlat-relay` injects
//! faults, `lowlat-idl` generates stubs. No crate depends on this one; the executable is run by
//! people, by the scripts/ measurements, by the Python package's tests and by `lowlat lab`
//! itself, which starts its servers as `lowlat serve`, `lowlat pingpong` and `lowlat workload`.
//! Logic worth reusing belongs in a library, never here.

// The doc comments of the argument structs (in `cmd`) are the command's help text (clap), where
// `[JSON]` means an optional argument, not a link.
#![allow(rustdoc::broken_intra_doc_links)]

mod cmd;
mod key;
mod log;
mod measure;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cmd::{account, agent, bench, call, gen, instructions, lab, pingpong, relay, serve, stat, workload};

#[derive(Parser)]
#[command(
    name = "lowlat",
    version,
    about = "Low-latency RPC for Linux, and a laboratory that shows where every microsecond goes"
)]
struct Cli {
    /// How log lines go to standard error: `text`, or `json` (one object per line) for
    /// machines. Which are written: `RUST_LOG` (default: lowlat's at info).
    #[arg(long, global = true, value_enum, default_value_t = log::LogFormat::Text)]
    log_format: log::LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Serve(serve::Args),
    Account(account::Args),
    Instructions(instructions::Args),
    Call(call::Args),
    Stat(stat::Args),
    Bench(bench::Args),
    Pingpong(pingpong::Args),
    Relay(relay::Args),
    #[command(hide = true)]
    Workload(workload::Args),
    Gen(gen::Args),
    Lab(lab::Args),
    Agent(agent::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    log::install(cli.log_format);
    let done = match cli.cmd {
        Cmd::Serve(args) => serve::run(args),
        Cmd::Account(args) => account::run(args),
        Cmd::Instructions(args) => instructions::run(args),
        Cmd::Call(args) => call::run(args),
        Cmd::Stat(args) => stat::run(args),
        Cmd::Bench(args) => bench::run(args),
        Cmd::Pingpong(args) => pingpong::run(args),
        Cmd::Relay(args) => relay::run(args),
        Cmd::Workload(args) => workload::run(args),
        Cmd::Gen(args) => gen::run(args),
        Cmd::Lab(args) => lab::run(args),
        Cmd::Agent(args) => agent::run(args),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("lowlat: {msg}");
            ExitCode::FAILURE
        }
    }
}
