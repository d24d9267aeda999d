//! An honest open-loop load generator: calls are scheduled at a fixed or Poisson rate before the
//! run starts and each is sent at its scheduled time whatever the replies do, by whichever of
//! the sending threads is free; latency is timed from the **scheduled** send time (so a call
//! held up by a slow one is charged for the wait: no coordinated omission), and the generator
//! reports how far it fell behind its own schedule, so a point it could not offer is marked
//! rather than mistaken for the server's queue.
//!
//! Each sending thread carries one call at a time on a blocking client, so the number of
//! threads bounds the calls in flight; [`senders_for`] sizes them from the rate, and a run that
//! had too few shows it as lag.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lowlat::Error;

use crate::stats::new_histogram;

/// A send more than this behind its schedule is late.
pub const LATE: Duration = Duration::from_micros(10);

/// A run whose generator sent more than this fraction of its calls late did not offer the load
/// it claims.
pub const LATE_FRACTION_SUSTAINED: f64 = 0.01;

/// How the calls' send times are spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly, one every 1/rate seconds.
    Fixed,
    /// Exponential gaps with mean 1/rate (independent arrivals, as the queueing model
    /// r = s/(1-u) assumes).
    Poisson,
}

/// What to offer.
#[derive(Clone, Debug)]
pub struct OpenLoop {
    /// Calls per second, over all senders.
    pub rate: f64,
    /// How sends are spaced in time.
    pub arrivals: Arrivals,
    /// Calls scheduled.
    pub calls: u64,
    /// Sending threads: the most calls in flight at once.
    pub senders: usize,
    /// Unscheduled calls before the run, spread over the senders.
    pub warmup: u64,
    /// Pin the sending threads to this CPU.
    pub cpu: Option<usize>,
    /// Seeds the Poisson schedule (the same seed, the same schedule).
    pub seed: u64,
}

/// Senders enough for `rate` calls per second taking up to ~200 µs each (Little's law, with
/// room), at least `min`: fewer would put the generator behind its schedule.
pub fn senders_for(rate: f64, min: usize) -> usize {
    ((rate * 200e-6).ceil() as usize + 1).max(min).clamp(1, 256)
}

/// What an open-loop run measured.
#[derive(Debug)]
pub struct OpenLoopRun {
    /// Successful calls' latency from their scheduled send time, ns.
    pub latency: Histogram<u64>,
    /// How late each call was sent, ns (0 when on time).
    pub lag: Histogram<u64>,
    /// Calls per second offered: the schedule's rate ([`OpenLoop::rate`]).
    pub offered_per_s: f64,
    /// Calls sent per second: below the offered rate when the generator fell behind.
    pub sent_per_s: f64,
    /// Successful calls per second.
    pub completed_per_s: f64,
    /// Calls sent.
    pub sent: u64,
    /// Calls that succeeded.
    pub completed: u64,
    /// Calls the server shed with `Busy`.
    pub busy: u64,
    /// Calls that failed otherwise (timeouts, lost sessions, ...).
    pub failed: u64,
    /// The error of the first failed call seen (`Busy` included), if any.
    pub first_failure: Option<Error>,
    /// Calls sent more than [`LATE`] behind their schedule.
    pub late: u64,
    /// Sending threads used.
    pub senders: usize,
    /// Seconds from the start of the schedule to the last reply.
    pub wall_s: f64,
}

impl OpenLoopRun {
    /// How late the latest send was, ns.
    pub fn max_lag_ns(&self) -> u64 {
        self.lag.max()
    }

    /// The fraction of sent calls more than [`LATE`] behind schedule (0 when none were sent).
    pub fn late_fraction(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.late as f64 / self.sent as f64
        }
    }

    /// Whether the generator kept to its schedule (no more than 1% of sends late by over
    /// 10 µs): if not, the latencies include its own backlog and the point is not the load it
    /// names.
    pub fn sustained(&self) -> bool {
        self.late_fraction() <= LATE_FRACTION_SUSTAINED
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        format!(
            "open loop: offered {:.0} calls/s, sent {:.0}/s, completed {:.0}/s on {} senders; {} busy, {} other \
             failures; p50 {} p99 {} p99.9 {} µs from the scheduled time; generator lag max {} µs, {:.2}% of \
             sends late by > {} µs{}",
            self.offered_per_s,
            self.sent_per_s,
            self.completed_per_s,
            self.senders,
            self.busy,
            self.failed,
            crate::stats::us(self.latency.value_at_quantile(0.50)),
            crate::stats::us(self.latency.value_at_quantile(0.99)),
            crate::stats::us(self.latency.value_at_quantile(0.999)),
            crate::stats::us(self.max_lag_ns()),
            100.0 * self.late_fraction(),
            LATE.as_micros(),
            if self.sustained() { "" } else { " (NOT SUSTAINED: the generator fell behind its schedule)" }
        )
    }
}

/// The send times, as offsets from the start, ns.
fn schedule(spec: &OpenLoop) -> Vec<u64> {
    let mean_ns = 1e9 / spec.rate.max(1e-3);
    let mut rng = spec.seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut at = 0f64;
    (0..spec.calls)
        .map(|i| match spec.arrivals {
            Arrivals::Fixed => (i as f64 * mean_ns) as u64,
            Arrivals::Poisson => {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let u = ((rng >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                at += -u.ln() * mean_ns;
                at as u64
            }
        })
        .collect()
}

/// Waits until `t`: asleep through a long gap (a thread that spins all the time is the first
/// the scheduler preempts), spinning the last stretch.
fn wait_until(t: Instant) {
    let now = Instant::now();
    if t > now + Duration::from_micros(300) {
        std::thread::sleep(t - now - Duration::from_micros(150));
    }
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

/// What one sender saw.
struct SenderRun {
    latency: Histogram<u64>,
    lag: Histogram<u64>,
    sent: u64,
    busy: u64,
    failed: u64,
    late: u64,
    first_failure: Option<Error>,
    last_done: Option<Instant>,
}

/// Runs the schedule: `caller(i)` makes sender `i`'s calling function (owning its buffers, so
/// the loop allocates nothing), which makes one call. A warm-up failure ends the run with that
/// error.
pub fn run<C, F>(spec: &OpenLoop, caller: F) -> Result<OpenLoopRun, Error>
where
    F: Fn(usize) -> C + Sync,
    C: FnMut() -> Result<(), Error>,
{
    let senders = spec.senders.max(1);
    let at = schedule(spec);
    let next = AtomicU64::new(0);
    let barrier = Barrier::new(senders);
    let start_cell = std::sync::OnceLock::new();
    let runs: Vec<Result<SenderRun, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..senders)
            .map(|i| {
                let (at, next, barrier, start_cell, caller) = (&at, &next, &barrier, &start_cell, &caller);
                s.spawn(move || -> Result<SenderRun, Error> {
                    if let Some(cpu) = spec.cpu {
                        let _ = lowlat_sys::pin_to_cpu(cpu);
                    }
                    let mut call = caller(i);
                    let mut warm = Ok(());
                    for _ in 0..spec.warmup.div_ceil(senders as u64) {
                        warm = warm.and_then(|()| call());
                    }
                    // Every sender waits here even after a failed warm-up, so none is left
                    // waiting for it.
                    barrier.wait();
                    warm?;
                    // A little ahead, so the first calls are not late by the threads' start.
                    let start: Instant = *start_cell.get_or_init(|| Instant::now() + Duration::from_millis(2));
                    let mut r = SenderRun {
                        latency: new_histogram(),
                        lag: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds are valid"),
                        sent: 0,
                        busy: 0,
                        failed: 0,
                        late: 0,
                        first_failure: None,
                        last_done: None,
                    };
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&offset) = at.get(k as usize) else { break };
                        let scheduled = start + Duration::from_nanos(offset);
                        wait_until(scheduled);
                        let lag = Instant::now().saturating_duration_since(scheduled);
                        let _ = r.lag.record(lag.as_nanos() as u64);
                        r.late += u64::from(lag > LATE);
                        r.sent += 1;
                        let result = call();
                        let done = Instant::now();
                        r.last_done = Some(done);
                        match result {
                            Ok(()) => {
                                let _ = r.latency.record((done - scheduled).as_nanos().max(10) as u64);
                            }
                            Err(e) => {
                                if matches!(e, Error::Busy { .. }) {
                                    r.busy += 1;
                                } else {
                                    r.failed += 1;
                                }
                                r.first_failure.get_or_insert(e);
                            }
                        }
                    }
                    Ok(r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("an open-loop sender panicked")).collect()
    });
    let mut out = OpenLoopRun {
        latency: new_histogram(),
        lag: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds are valid"),
        offered_per_s: spec.rate,
        sent_per_s: 0.0,
        completed_per_s: 0.0,
        sent: 0,
        completed: 0,
        busy: 0,
        failed: 0,
        first_failure: None,
        late: 0,
        senders,
        wall_s: 0.0,
    };
    let mut last_done: Option<Instant> = None;
    for r in runs {
        let r = r?;
        out.latency.add(&r.latency).expect("same bounds");
        out.lag.add(&r.lag).expect("same bounds");
        out.sent += r.sent;
        out.busy += r.busy;
        out.failed += r.failed;
        out.late += r.late;
        if out.first_failure.is_none() {
            out.first_failure = r.first_failure;
        }
        last_done = last_done.max(r.last_done);
    }
    out.completed = out.latency.len();
    if let (Some(&start), Some(end)) = (start_cell.get(), last_done) {
        // Sent over the span the schedule covers (or longer, when the generator fell behind);
        // completed over the span until the last reply.
        let scheduled_s = at.last().map_or(0.0, |&ns| ns as f64 / 1e9);
        out.wall_s = end.saturating_duration_since(start).as_secs_f64().max(1e-9);
        out.sent_per_s = out.sent as f64 / out.wall_s.max(scheduled_s).max(1e-9);
        out.completed_per_s = out.completed as f64 / out.wall_s;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisson_schedule_has_the_asked_rate_and_is_repeatable() {
        let spec = OpenLoop {
            rate: 10_000.0,
            arrivals: Arrivals::Poisson,
            calls: 20_000,
            senders: 1,
            warmup: 0,
            cpu: None,
            seed: 7,
        };
        let a = schedule(&spec);
        assert_eq!(a, schedule(&spec));
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let rate = a.len() as f64 / (*a.last().unwrap() as f64 / 1e9);
        assert!((rate / 10_000.0 - 1.0).abs() < 0.05, "{rate} calls/s");
        let fixed = schedule(&OpenLoop { arrivals: Arrivals::Fixed, ..spec });
        assert_eq!(&fixed[..3], &[0, 100_000, 200_000]);
    }

    /// A slow call does not hold up the schedule while senders are free, and is charged from its
    /// scheduled time; with one sender, the calls behind a slow one are sent late, and the run
    /// says so.
    #[test]
    fn latency_is_timed_from_the_schedule_and_lag_is_reported() {
        let spec =
            OpenLoop { rate: 1_000.0, arrivals: Arrivals::Fixed, calls: 40, senders: 1, warmup: 0, cpu: None, seed: 1 };
        let slow_first = |_| {
            let mut n = 0;
            move || {
                n += 1;
                if n == 1 {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(())
            }
        };
        let one = run(&spec, slow_first).unwrap();
        assert_eq!((one.sent, one.completed, one.busy, one.failed), (40, 40, 0, 0));
        // The call due at 1 ms waited for the 20 ms one: sent ~19 ms late, and timed so.
        assert!(one.max_lag_ns() >= 15_000_000, "max lag {} ns", one.max_lag_ns());
        assert!(one.late >= 15 && !one.sustained(), "{}", one.describe());
        // ...and so were the calls behind it, each timed from its own scheduled time.
        assert!(one.latency.count_between(1_000_000, u64::MAX) >= 10, "{}", one.describe());
        // Enough senders: the slow call is one sender's; the others keep the schedule.
        let many = run(&OpenLoop { senders: 8, ..spec }, slow_first).unwrap();
        assert_eq!(many.completed, 40);
        assert!(many.latency.max() >= 20_000_000, "the slow call counts from its scheduled time");
        assert!(many.latency.value_at_quantile(0.5) < 5_000_000, "{}", many.describe());
    }

    #[test]
    fn busy_and_other_failures_are_counted_apart() {
        let spec = OpenLoop {
            rate: 20_000.0,
            arrivals: Arrivals::Poisson,
            calls: 300,
            senders: 2,
            warmup: 0,
            cpu: None,
            seed: 3,
        };
        let call_site = lowlat::CallSite { uri: "udp://x".into(), program: 1, version: 1, proc_no: 0, name: None };
        let r = run(&spec, |_| {
            let call_site = call_site.clone();
            let mut n = 0u32;
            move || {
                n += 1;
                match n % 3 {
                    0 => Err(Error::Busy { call: call_site.clone(), message: None }),
                    1 => Err(Error::Timeout {
                        call: call_site.clone(),
                        after: Duration::from_millis(1),
                        execution: lowlat::Execution::Unknown,
                    }),
                    _ => Ok(()),
                }
            }
        })
        .unwrap();
        assert_eq!(r.sent, 300);
        assert_eq!(r.busy + r.failed + r.completed, 300);
        assert!(r.busy >= 90 && r.failed >= 90 && r.completed >= 90, "{}", r.describe());
    }
}
