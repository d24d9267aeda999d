//! `lowlat bench`: a closed- or open-loop benchmark of a lab procedure.

use lowlat::SpinPolicy;
use lowlat_lab::bench::{self, BenchSpec};
use lowlat_lab::tasks::TasksSpec;

use crate::key::KeyArgs;
use crate::measure::{pin, print_summary};

/// Closed-loop (or, with --rate, open-loop) benchmark of a lab procedure.
#[derive(clap::Args)]
pub(crate) struct Args {
    uri: String,
    #[arg(long, default_value = "null")]
    proc: String,
    /// Payload bytes (maxarg, maxresult, echo); microseconds of work per call (spin) or of sleep
    /// on the server thread that receives it (block).
    #[arg(long, default_value_t = 0)]
    size: usize,
    /// Measured calls over all threads.
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Unmeasured calls per thread first.
    #[arg(long, default_value_t = 2_000)]
    warmup: u64,
    /// Calling threads (closed loop); sending threads, each with many calls in flight (open
    /// loop).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Offered calls per second, open loop: Poisson arrivals sent on schedule whatever the
    /// replies do (async calls, many in flight per sending thread), latency from each
    /// call's scheduled time; prints the generator's own lag and the Busy count. With
    /// --spin-us 0 the senders also sleep until each send is due (less CPU, later sends).
    #[arg(long)]
    rate: Option<f64>,
    /// Calls in flight. Closed loop (no --rate): each thread keeps this many in flight, making
    /// the next as soon as one completes (default 1: one call at a time). Open loop: the most
    /// in flight at once over all senders (default: enough for replies of up to 1 ms at
    /// --rate, 9 to 64); a call due while they are all out is sent late. A server grants a
    /// client at most 64 call slots by default.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    in_flight: Option<u16>,
    /// Tasks on one async executor (a tokio `current_thread` runtime), each awaiting one call
    /// at a time through the generated `*_async` methods: throughput, latency and fairness
    /// (the longest run of calls one task completed while the others completed none) as an
    /// async service sees them. The client keeps its default call slots.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), conflicts_with_all = ["rate", "in_flight", "threads"])]
    tasks: Option<u32>,
    #[arg(long, default_value = "adaptive")]
    spin_us: SpinPolicy,
    /// Pin the calling threads, and the threads lowlat starts for the client, to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// udp://, eth:// and xdp://: no end-to-end CRC32C on lowlat's frames (both ends must
    /// agree).
    #[arg(long)]
    no_checksum: bool,
    #[command(flatten)]
    key: KeyArgs,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { uri, proc, size, calls, warmup, threads, rate, in_flight, tasks, spin_us, cpu, json, no_checksum, key } =
        args;
    pin(cpu)?;
    let psk = key.load()?;
    let spec = BenchSpec {
        uri,
        proc,
        size,
        calls,
        warmup,
        threads,
        rate,
        in_flight: in_flight.map(usize::from),
        spin: spin_us,
        cpu,
        checksum: !no_checksum,
        psk,
        encrypt: key.encrypt,
        ..BenchSpec::default()
    };
    if let Some(tasks) = tasks {
        let spec = TasksSpec { bench: spec, tasks: tasks as usize, slots: None };
        let run = lowlat_lab::tasks::run(&spec).map_err(|e| e.to_string())?;
        println!("{}", if json { run.json() } else { run.describe() });
        return Ok(());
    }
    if spec.rate.is_some() {
        let (s, run) = bench::run_open(&spec).map_err(|e| e.to_string())?;
        print_summary(&s, json);
        if json {
            println!("{}", bench::open_loop_json(&run));
        } else {
            println!("{}", run.describe());
        }
        return Ok(());
    }
    let s = bench::run(&spec).map_err(|e| e.to_string())?;
    print_summary(&s, json);
    Ok(())
}
