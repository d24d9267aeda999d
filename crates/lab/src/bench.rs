//! RPC benchmarks over the lab interface: closed loop (each thread calls as soon as its previous
//! call returns) or open loop (calls sent on a schedule by [`crate::openloop`], latency measured
//! from the scheduled time: no coordinated omission).

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lowlat::{ClientConfig, Error, SpinPolicy};

use crate::interface::{self, LabClient};
use crate::latency::{new_histogram, Summary};
use crate::openloop::{self, Arrivals, OpenLoop, OpenLoopRun};

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    /// Server URI to bind to (e.g. `udp://host:port`).
    pub uri: String,
    /// A lab procedure: null, minus, maxarg, maxresult, echo, count, spin.
    pub proc: String,
    /// Payload bytes (argument for maxarg/echo, result for maxresult/echo); for spin, the
    /// microseconds each call keeps a server worker busy.
    pub size: usize,
    /// Measured calls, over all threads.
    pub calls: u64,
    /// Calls per thread before measuring.
    pub warmup: u64,
    /// Calling threads (closed loop); sending threads (open loop, each with many calls in
    /// flight).
    pub threads: usize,
    /// Open loop: the most calls in flight at once (`None`: enough for the rate,
    /// [`crate::openloop::in_flight_for`]). Closed loop: the calls each thread keeps in flight
    /// (`None`: one, each call made when the previous returns).
    pub in_flight: Option<usize>,
    /// Calls per second in all (open loop, Poisson arrivals); `None` = closed loop.
    pub rate: Option<f64>,
    /// Client spin policy: how long a caller busy-polls for the reply before blocking.
    pub spin: SpinPolicy,
    /// Pin the calling threads to this CPU.
    pub cpu: Option<usize>,
    /// Deadline of each call (`ClientConfig::deadline`).
    pub deadline: Duration,
    /// eth:// and xdp:// only: the end-to-end CRC32C (must match the server's setting).
    pub checksum: bool,
    /// Bind with this pre-shared key and tag every frame (the server must have the same).
    pub psk: Option<lowlat::Psk>,
    /// With `psk`: encrypt every frame's body (`ClientConfig::encrypt`).
    pub encrypt: bool,
}

impl Default for BenchSpec {
    fn default() -> Self {
        BenchSpec {
            uri: String::new(),
            proc: "null".into(),
            size: 0,
            calls: 10_000,
            warmup: 1_000,
            threads: 1,
            in_flight: None,
            rate: None,
            spin: SpinPolicy::Adaptive,
            cpu: None,
            deadline: Duration::from_secs(10),
            checksum: true,
            psk: None,
            encrypt: false,
        }
    }
}

/// Payload bytes a call of `proc` moves (arguments plus results).
pub fn payload_per_call(proc: &str, size: usize) -> usize {
    match proc {
        "null" => 0,
        "minus" => 12,
        "maxarg" | "maxresult" => size,
        "echo" => 2 * size,
        "count" => 8,
        "spin" | "block" => 4,
        _ => size,
    }
}

/// One call of `proc`, with buffers owned by the caller so the loop allocates nothing.
pub fn call_once(c: &LabClient, proc: u32, arg: &[u8], size: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    match proc {
        interface::NULL => c.null(),
        interface::MINUS => c.minus(7, 5).map(|_| ()),
        interface::MAXARG => c.maxarg(arg),
        interface::MAXRESULT => c.maxresult(size as u32, out),
        interface::COUNT => c.count().map(|_| ()),
        interface::SPIN => c.spin(size.try_into().unwrap_or(u32::MAX)),
        interface::BLOCK => c.block(size.try_into().unwrap_or(u32::MAX)),
        _ => c.echo(arg, out),
    }
}

/// The lab procedure `spec` names, and a client with call slots for `calls_at_once` calls (a
/// closed loop's threads, an open loop's calls in flight).
fn connect(spec: &BenchSpec, calls_at_once: usize) -> Result<(u32, LabClient), Error> {
    let proc_no = interface::procedure_number(&spec.proc).filter(|p| *p <= interface::BLOCK).ok_or_else(|| {
        Error::InvalidUri {
            uri: spec.proc.clone(),
            reason: "unknown lab procedure; expected null, minus, maxarg, maxresult, echo, count, spin or block".into(),
        }
    })?;
    let cfg = ClientConfig { slots: u16::try_from(calls_at_once).unwrap_or(u16::MAX).max(8), ..client_config(spec) };
    Ok((proc_no, LabClient::connect(&spec.uri, cfg)?))
}

/// The client's configuration `spec` asks for (its default slots).
pub(crate) fn client_config(spec: &BenchSpec) -> ClientConfig {
    ClientConfig {
        spin: spec.spin,
        deadline: spec.deadline,
        max_message: spec.size.max(4 << 20),
        checksum: spec.checksum,
        psk: spec.psk.clone(),
        encrypt: spec.encrypt,
        // lowlat's own threads (the acknowledger, the reactor) beside the callers.
        pin_cpus: spec.cpu.into_iter().collect(),
        ..ClientConfig::default()
    }
}

fn summarise(spec: &BenchSpec, threads: usize, h: &Histogram<u64>, wall_s: f64, errors: u64) -> Summary {
    Summary::from_histogram(
        "rpc",
        spec.uri.split("://").next().unwrap_or("?"),
        &spec.proc,
        spec.size,
        payload_per_call(&spec.proc, spec.size),
        threads,
        &spec.spin.to_string(),
        h,
        wall_s,
        errors,
    )
}

/// The schedule [`run_open`] keeps for `spec`.
fn open_plan(spec: &BenchSpec) -> Result<OpenLoop, Error> {
    let rate = spec
        .rate
        .ok_or_else(|| Error::InvalidUri { uri: spec.uri.clone(), reason: "an open-loop run needs a rate".into() })?;
    Ok(OpenLoop {
        rate,
        arrivals: Arrivals::Poisson,
        calls: spec.calls,
        senders: spec.threads.max(1),
        in_flight: spec.in_flight.unwrap_or_else(|| openloop::in_flight_for(rate, spec.threads)),
        warmup: spec.warmup,
        cpu: spec.cpu,
        seed: 0x6C6F_776C_6174,
        // A run told never to spin for replies does not spin for its schedule either.
        spin_before_send: if spec.spin == SpinPolicy::Block { Duration::ZERO } else { openloop::SPIN_BEFORE_SEND },
    })
}

/// The machine's floor for the schedule [`run_open`] keeps for `spec`: the same sends' times
/// waited for by threads that make no call ([`openloop::schedule_floor`]).
pub fn schedule_floor(spec: &BenchSpec) -> Result<openloop::ScheduleFloor, Error> {
    open_plan(spec).map(|plan| openloop::schedule_floor(&plan))
}

/// Runs `spec` open loop at `spec.rate` (Poisson arrivals) from `spec.threads` sending threads
/// with up to `spec.in_flight` calls in flight; the summary's latencies are from the scheduled
/// send times, its rate the completed calls', its errors the `Busy` and other failures. A call
/// spins for its reply as `spec.spin` says before its sender goes on (time its next sends may be
/// late by): a flood of slow calls wants [`SpinPolicy::Block`], with which the senders also
/// sleep until each send is due instead of spinning its last [`openloop::SPIN_BEFORE_SEND`].
pub fn run_open(spec: &BenchSpec) -> Result<(Summary, OpenLoopRun), Error> {
    let plan = open_plan(spec)?;
    let (proc_no, client) = connect(spec, plan.in_flight)?;
    let arg: Vec<u8> = (0..spec.size).map(|i| i as u8).collect();
    let (client, arg) = (&client, &arg[..]);
    let run = openloop::run(&plan, |_| move || client.call_async(proc_no, arg, spec.size))?;
    if run.completed == 0 {
        return Err(run
            .first_failure
            .unwrap_or(Error::Io { op: "benchmark".into(), source: std::io::Error::other("no call completed") }));
    }
    let summary = summarise(spec, run.senders, &run.latency, run.wall_s, run.busy + run.failed);
    Ok((summary, run))
}

/// Runs the benchmark and summarises it, with the server's CPU per call where it can be read.
pub fn run(spec: &BenchSpec) -> Result<Summary, Error> {
    let cpu = ServerCpu::begin(&spec.uri, spec.psk.clone(), spec.encrypt);
    let (mut s, _) = run_histogram(spec)?;
    s.server_cpu_ns_per_call = cpu.and_then(|c| c.per_call());
    Ok(s)
}

/// The server's serving-thread CPU time and calls, read through its stats program before a run,
/// to be read again after it (`Summary::server_cpu_ns_per_call`). Only lowlat's protocol has
/// the stats program; an older server without the counter gives nothing.
pub struct ServerCpu {
    client: lowlat::Client,
    cpu_ns: u64,
    calls: u64,
}

impl ServerCpu {
    /// The server's counters now, or `None` where they cannot be read.
    pub fn begin(uri: &str, psk: Option<lowlat::Psk>, encrypt: bool) -> Option<ServerCpu> {
        // Over several servers, one server's CPU per call of all the calls would mislead.
        if uri.starts_with("onc+") || uri.contains(',') {
            return None;
        }
        let cfg = ClientConfig { slots: 1, psk, encrypt, deadline: Duration::from_secs(2), ..ClientConfig::default() };
        let client = lowlat::Client::connect_with(uri, lowlat::stats::PROGRAM, 1, cfg).ok()?;
        let (cpu_ns, calls) = Self::read(&client)?;
        Some(ServerCpu { client, cpu_ns, calls })
    }

    fn read(client: &lowlat::Client) -> Option<(u64, u64)> {
        let s = lowlat::EndpointStats::from_fields(&lowlat::stats::parse_text(&lowlat::stats::read(client).ok()?));
        (s.serving_cpu_ns > 0).then_some((s.serving_cpu_ns, s.calls))
    }

    /// The server's CPU ns per call since [`begin`](Self::begin).
    pub fn per_call(&self) -> Option<f64> {
        let (cpu_ns, calls) = Self::read(&self.client)?;
        // The two readings are calls too.
        let calls = calls.checked_sub(self.calls)?.saturating_sub(1);
        (calls > 0).then(|| cpu_ns.saturating_sub(self.cpu_ns) as f64 / calls as f64)
    }
}

/// What one calling thread of [`run_histogram`] measured.
struct ThreadRun {
    hist: Histogram<u64>,
    errors: u64,
    first_error: Option<Error>,
    /// When its measured calls began and ended (none if its warm-up failed).
    span: Option<(Instant, Instant)>,
}

/// What an open-loop run adds to its [`Summary`], as one JSON object.
pub fn open_loop_json(run: &OpenLoopRun) -> String {
    serde_json::json!({
        "offered_calls_per_s": run.offered_per_s,
        "sent_calls_per_s": run.sent_per_s,
        "completed_calls_per_s": run.completed_per_s,
        "senders": run.senders,
        "in_flight": run.in_flight,
        "peak_in_flight": run.peak_in_flight,
        "busy": run.busy,
        "other_failures": run.failed,
        "max_lag_ns": run.max_lag_ns(),
        "late_fraction": run.late_fraction(),
        "sustained": run.sustained(),
    })
    .to_string()
}

/// Runs the benchmark; returns the summary and the histogram of every measured call.
pub fn run_histogram(spec: &BenchSpec) -> Result<(Summary, Histogram<u64>), Error> {
    if spec.rate.is_some() {
        return run_open(spec).map(|(s, run)| (s, run.latency));
    }
    let threads = spec.threads.max(1);
    let window = spec.in_flight.unwrap_or(1).max(1);
    let (proc_no, client) = connect(spec, threads * window)?;
    let client = Arc::new(client);
    let per_thread = spec.calls.div_ceil(threads as u64);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let client = client.clone();
            let barrier = barrier.clone();
            let spec = spec.clone();
            std::thread::spawn(move || -> ThreadRun {
                if let Some(cpu) = spec.cpu {
                    let _ = lowlat_sys::pin_to_cpu(cpu);
                }
                let arg: Vec<u8> = (0..spec.size).map(|i| i as u8).collect();
                let mut out = Vec::with_capacity(spec.size);
                let mut h = new_histogram();
                let mut errors = 0u64;
                let mut first_error = None;
                for _ in 0..spec.warmup {
                    if let Err(e) = call_once(&client, proc_no, &arg, spec.size, &mut out) {
                        barrier.wait();
                        return ThreadRun { hist: h, errors: 1, first_error: Some(e), span: None };
                    }
                }
                barrier.wait();
                // Each thread times its own run: the thread that released the barrier may be
                // scheduled again only after these have made most of their calls (two CPUs, one
                // of them the server's), so its clock would miss them.
                let began = Instant::now();
                if window > 1 {
                    let r = keep_in_flight(&client, proc_no, &arg, spec.size, window, per_thread, &mut h);
                    return ThreadRun { hist: h, errors: r.0, first_error: r.1, span: Some((began, Instant::now())) };
                }
                for _ in 0..per_thread {
                    let t0 = Instant::now();
                    match call_once(&client, proc_no, &arg, spec.size, &mut out) {
                        Ok(()) => {
                            let _ = h.record(t0.elapsed().as_nanos() as u64);
                        }
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
                ThreadRun { hist: h, errors, first_error, span: Some((began, Instant::now())) }
            })
        })
        .collect();
    barrier.wait();
    let mut all = new_histogram();
    let mut errors = 0;
    let mut first_error = None;
    let mut span: Option<(Instant, Instant)> = None;
    for h in handles {
        let run = h.join().expect("benchmark thread panicked");
        all.add(&run.hist).expect("same bounds");
        errors += run.errors;
        if first_error.is_none() {
            first_error = run.first_error;
        }
        if let Some((b, e)) = run.span {
            span = Some(span.map_or((b, e), |(sb, se)| (sb.min(b), se.max(e))));
        }
    }
    let wall = span.map_or(0.0, |(b, e)| (e - b).as_secs_f64());
    if all.is_empty() {
        return Err(first_error
            .unwrap_or(Error::Io { op: "benchmark".into(), source: std::io::Error::other("no call completed") }));
    }
    let mut summary = summarise(spec, threads, &all, wall, errors);
    summary.first_error = first_error.map(|e| e.to_string());
    Ok((summary, all))
}

/// A closed loop of `calls` calls from this thread keeping `window` in flight: a call is made
/// (and sent) as soon as one completes. Each call's latency, from its making to its completion,
/// goes into `h`, timed as eRPC times a burst: the calls made together share the clock read
/// before the first of them, and the calls found complete in one look share the one read after
/// it (two reads per call were a sixth of the caller's time at 64 in flight over shared memory,
/// and counted it against the calls). Returns the failures and the first of them.
fn keep_in_flight(
    client: &LabClient,
    proc_no: u32,
    arg: &[u8],
    size: usize,
    window: usize,
    calls: u64,
    h: &mut Histogram<u64>,
) -> (u64, Option<Error>) {
    let mut set = lowlat::InFlight::new(window);
    let mut made_at = vec![Instant::now(); window];
    let (mut made, mut errors, mut first_error) = (0u64, 0u64, None);
    loop {
        if made < calls && !set.is_full() {
            let at = Instant::now();
            while made < calls && !set.is_full() {
                let place = set.push_with(|| client.call_async(proc_no, arg, size)).expect("a free place");
                made_at[place] = at;
                made += 1;
            }
        }
        if set.is_empty() {
            return (errors, first_error);
        }
        let mut now = None;
        set.wait(None, |place, r| match r {
            Ok(()) => {
                let now = *now.get_or_insert_with(Instant::now);
                let _ = h.record(now.saturating_duration_since(made_at[place]).as_nanos() as u64);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        });
    }
}

/// Raw ping-pong of `size` bytes, summarised like an RPC run; also returns the latency histogram.
pub fn run_raw(
    uri: &str,
    size: usize,
    calls: u64,
    warmup: u64,
    spin: SpinPolicy,
    opts: crate::pingpong::RawOptions,
    psk: Option<&lowlat::Psk>,
) -> Result<(Summary, Histogram<u64>), crate::pingpong::PingPongError> {
    let (h, wall) = crate::pingpong::run(uri, size, calls, warmup, spin, opts, psk)?;
    let transport = uri.split("://").next().unwrap_or("?");
    // The shared-memory floor always spins, whatever was asked.
    let spin = if opts.floor && transport == "shm" { SpinPolicy::Forever } else { spin };
    let summary = Summary::from_histogram(
        "raw",
        transport,
        if opts.floor { "floor" } else { "pingpong" },
        size,
        2 * size,
        1,
        &spin.to_string(),
        &h,
        wall.as_secs_f64(),
        0,
    );
    Ok((summary, h))
}
