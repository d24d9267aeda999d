//! Many tasks on one executor, each awaiting one call at a time: how an async service is usually
//! written (a tokio `current_thread` runtime, the generated `*_async` methods), and how fast and
//! how fairly lowlat serves its tasks. Fairness is the longest run of calls one task completed
//! while no other task completed any: with calls that overlap and tasks that take turns it stays
//! near one; a future that spins inside `poll()` until its reply comes lets one task run
//! thousands in a row while the others wait.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use hdrhistogram::Histogram;
use lowlat::Error;

use crate::bench::BenchSpec;
use crate::interface::{self, LabClient};
use crate::latency::new_histogram;

/// What to run: the benchmark's procedure, server and client settings (`bench.threads`,
/// `bench.in_flight` and `bench.rate` do not apply), on `tasks` tasks.
#[derive(Clone, Debug)]
pub struct TasksSpec {
    /// The server, the procedure, the calls and the client's settings.
    pub bench: BenchSpec,
    /// Tasks on the one executor.
    pub tasks: usize,
    /// Call slots (`None`: the client's default, as a new user gets it).
    pub slots: Option<u16>,
}

impl Default for TasksSpec {
    fn default() -> Self {
        TasksSpec { bench: BenchSpec { calls: 100_000, ..BenchSpec::default() }, tasks: 64, slots: None }
    }
}

/// What a run saw.
#[derive(Debug)]
pub struct TasksRun {
    /// Each measured call's latency, ns.
    pub latency: Histogram<u64>,
    /// Calls completed per second of the measured run.
    pub calls_per_s: f64,
    /// The longest run of calls one task completed with no other task completing any.
    pub longest_run: u64,
    /// The most calls awaited at once.
    pub peak_in_flight: usize,
    /// Failed calls, and the first failure.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<Error>,
    /// Tasks run.
    pub tasks: usize,
    /// Seconds the measured calls took.
    pub wall_s: f64,
    /// The server's CPU per call over the run, ns (`crate::bench::ServerCpu`).
    pub server_cpu_ns_per_call: Option<f64>,
}

impl TasksRun {
    /// One line for people.
    pub fn describe(&self) -> String {
        let us = |q: f64| crate::latency::us(self.latency.value_at_quantile(q));
        format!(
            "{} tasks on one executor: {:.0} calls/s, p50 {} p99 {} p99.9 {} max {} µs; longest run by one task \
             {} calls, peak in flight {}; {} failed",
            self.tasks,
            self.calls_per_s,
            us(0.5),
            us(0.99),
            us(0.999),
            crate::latency::us(self.latency.max()),
            self.longest_run,
            self.peak_in_flight,
            self.errors
        )
    }

    /// The run as one JSON object.
    pub fn json(&self) -> String {
        serde_json::json!({
            "tasks": self.tasks,
            "calls_per_s": self.calls_per_s,
            "p50_ns": self.latency.value_at_quantile(0.5),
            "p99_ns": self.latency.value_at_quantile(0.99),
            "p999_ns": self.latency.value_at_quantile(0.999),
            "max_ns": self.latency.max(),
            "longest_run": self.longest_run,
            "peak_in_flight": self.peak_in_flight,
            "errors": self.errors,
            "first_error": self.first_error.as_ref().map(|e| e.to_string()),
            "server_cpu_ns_per_call": self.server_cpu_ns_per_call,
        })
        .to_string()
    }
}

/// What the tasks share (one thread: plain cells).
#[derive(Default)]
struct Shared {
    /// Calls still to make in this phase.
    left: Cell<u64>,
    in_flight: Cell<usize>,
    peak: Cell<usize>,
    /// The task that completed the last call, and how many it completed in a row.
    last: Cell<(usize, u64)>,
    longest: Cell<u64>,
    errors: Cell<u64>,
    first_error: RefCell<Option<Error>>,
    latency: RefCell<Option<Histogram<u64>>>,
}

impl Shared {
    /// Counts from nothing, recording latencies from now on.
    fn reset(&self) {
        self.peak.set(0);
        self.last.set((usize::MAX, 0));
        self.longest.set(0);
        self.errors.set(0);
        *self.latency.borrow_mut() = Some(new_histogram());
    }

    fn take_one(&self) -> bool {
        let left = self.left.get();
        self.left.set(left.saturating_sub(1));
        left > 0
    }

    fn completed(&self, task: usize, began: Instant, r: Result<(), Error>) {
        let (last, run) = self.last.get();
        let run = if last == task { run + 1 } else { 1 };
        self.last.set((task, run));
        self.longest.set(self.longest.get().max(run));
        match r {
            Ok(()) => {
                if let Some(h) = self.latency.borrow_mut().as_mut() {
                    let _ = h.record(began.elapsed().as_nanos().max(1) as u64);
                }
            }
            Err(e) => {
                self.errors.set(self.errors.get() + 1);
                self.first_error.borrow_mut().get_or_insert(e);
            }
        }
    }
}

/// Runs `spec.tasks` tasks on a tokio `current_thread` runtime on this thread, each making
/// calls one after another until `spec.calls` are made in all.
pub fn run(spec: &TasksSpec) -> Result<TasksRun, Error> {
    let b = &spec.bench;
    let proc =
        interface::procedure_number(&b.proc).filter(|p| *p < interface::SPIN).ok_or_else(|| Error::InvalidUri {
            uri: b.proc.clone(),
            reason: "unknown lab procedure for tasks; expected null, minus, maxarg, maxresult, echo or count".into(),
        })?;
    let mut cfg = crate::bench::client_config(b);
    if let Some(slots) = spec.slots {
        cfg.slots = slots;
    }
    let client = Rc::new(LabClient::connect(&b.uri, cfg)?);
    if let Some(cpu) = b.cpu {
        let _ = lowlat_sys::pin_to_cpu(cpu);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|source| Error::Io { op: "build a current_thread runtime".into(), source })?;
    let (tasks, size) = (spec.tasks.max(1), b.size);
    let arg: Rc<[u8]> = (0..b.size).map(|i| i as u8).collect();
    let shared = Rc::new(Shared::default());
    let phase = |calls: u64| {
        shared.left.set(calls);
        let local = tokio::task::LocalSet::new();
        for task in 0..tasks {
            let (client, shared, arg) = (client.clone(), shared.clone(), arg.clone());
            local.spawn_local(async move {
                while shared.take_one() {
                    let began = Instant::now();
                    shared.in_flight.set(shared.in_flight.get() + 1);
                    shared.peak.set(shared.peak.get().max(shared.in_flight.get()));
                    let r = client.call_async(proc, &arg, size).await;
                    shared.in_flight.set(shared.in_flight.get() - 1);
                    shared.completed(task, began, r);
                }
            });
        }
        let began = Instant::now();
        rt.block_on(local);
        began.elapsed()
    };
    phase(b.warmup);
    if let Some(e) = shared.first_error.borrow_mut().take() {
        return Err(e);
    }
    // The warm-up's counts are not the run's.
    shared.reset();
    let cpu = crate::bench::ServerCpu::begin(&b.uri, b.psk.clone(), b.encrypt);
    let wall = phase(b.calls);
    let latency = shared.latency.borrow_mut().take().unwrap_or_else(new_histogram);
    let wall_s = wall.as_secs_f64();
    Ok(TasksRun {
        calls_per_s: latency.len() as f64 / wall_s.max(1e-9),
        latency,
        longest_run: shared.longest.get(),
        peak_in_flight: shared.peak.get(),
        errors: shared.errors.get(),
        first_error: shared.first_error.take(),
        tasks,
        wall_s,
        server_cpu_ns_per_call: cpu.and_then(|c| c.per_call()),
    })
}
