//! An honest open-loop load generator: calls are scheduled at a fixed or Poisson rate before the
//! run starts and each is sent at its scheduled time whatever the replies do; latency is timed
//! from the **scheduled** send time (so a call held up by a slow one is charged for the wait: no
//! coordinated omission), and the generator reports how far it fell behind its own schedule, so
//! a point it could not offer is marked rather than mistaken for the server's queue.
//!
//! Sending is decoupled from receiving: a few sending threads each keep many calls in flight as
//! futures ([`lowlat::Client::call_async`]), started when due and polled when their replies
//! wake them. A thread per call in flight (the first shape of this generator) needed ~100
//! threads to offer 10,000 slow calls a second, and on two CPUs their own scheduling was the
//! tail the run measured. A sender sleeps until shortly before its next call is due (its
//! timer slack made small, so the kernel does not defer the wake-up by its default 50 µs) and
//! spins only the last [`SPIN_BEFORE_SEND`] (or none: a run that must leave every spare cycle
//! to others sends 10-100 µs late instead, and says so).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lowlat::Error;

use crate::latency::new_histogram;

/// A send more than this behind its schedule is late.
pub const LATE: Duration = Duration::from_micros(10);

/// A run whose generator sent more than this fraction of its calls late did not offer the load
/// it claims.
pub const LATE_FRACTION_SUSTAINED: f64 = 0.01;

/// How long before a call is due its sender stops sleeping and spins, unless the plan says
/// otherwise ([`OpenLoop::spin_before_send`]): a wake-up from sleep comes 10-100 µs late here
/// (with 25 µs, a third of the sends at 100,000 calls/s were over 10 µs late), and spinning all
/// the time would take a CPU from the server being measured. One sending thread spins at most
/// one CPU's worth, whatever the rate.
pub const SPIN_BEFORE_SEND: Duration = Duration::from_micros(150);

/// The timer slack of a sending thread.
const SENDER_TIMER_SLACK: Duration = Duration::from_micros(1);

/// The most calls in flight a run sizes for itself ([`in_flight_for`]): a lowlat server grants
/// a client 64 call slots by default.
pub const MAX_DEFAULT_IN_FLIGHT: usize = 64;

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
    /// Sending threads (each keeps many calls in flight).
    pub senders: usize,
    /// The most calls in flight at once, over all senders (the client needs as many call
    /// slots): a call due while its sender has this share in flight waits, and is sent late.
    pub in_flight: usize,
    /// Unscheduled calls before the run, one at a time, spread over the senders.
    pub warmup: u64,
    /// Pin the sending threads to this CPU.
    pub cpu: Option<usize>,
    /// Seeds the Poisson schedule (the same seed, the same schedule).
    pub seed: u64,
    /// How long before each send its sender spins rather than sleeps ([`SPIN_BEFORE_SEND`]).
    pub spin_before_send: Duration,
}

/// Calls in flight enough for `rate` calls per second whose replies take up to ~1 ms (Little's
/// law, with room), at least `min`, at most [`MAX_DEFAULT_IN_FLIGHT`] unless `min` asks for
/// more: fewer would put the generator behind its schedule.
pub fn in_flight_for(rate: f64, min: usize) -> usize {
    ((rate * 1e-3).ceil() as usize + 8).min(MAX_DEFAULT_IN_FLIGHT).max(min).max(1)
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
    /// The most calls that could be in flight at once.
    pub in_flight: usize,
    /// The most calls that were in flight at once, a call answered within its first poll
    /// counting as one (over all senders, summed per sender: an upper bound).
    pub peak_in_flight: usize,
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
            "open loop: offered {:.0} calls/s, sent {:.0}/s, completed {:.0}/s from {} sender{} (at most {} in \
             flight, {} at the peak); {} busy, {} other failures; p50 {} p99 {} p99.9 {} µs from the scheduled \
             time; generator lag p99 {} max {} µs, {:.2}% of sends late by > {} µs{}",
            self.offered_per_s,
            self.sent_per_s,
            self.completed_per_s,
            self.senders,
            if self.senders == 1 { "" } else { "s" },
            self.in_flight,
            self.peak_in_flight,
            self.busy,
            self.failed,
            crate::latency::us(self.latency.value_at_quantile(0.50)),
            crate::latency::us(self.latency.value_at_quantile(0.99)),
            crate::latency::us(self.latency.value_at_quantile(0.999)),
            crate::latency::us(self.lag.value_at_quantile(0.99)),
            crate::latency::us(self.max_lag_ns()),
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
    peak_in_flight: usize,
}

impl SenderRun {
    fn new() -> SenderRun {
        SenderRun {
            latency: new_histogram(),
            lag: new_histogram(),
            sent: 0,
            busy: 0,
            failed: 0,
            late: 0,
            first_failure: None,
            last_done: None,
            peak_in_flight: 0,
        }
    }

    fn finished(&mut self, scheduled: Instant, result: Result<(), Error>) {
        let done = Instant::now();
        self.last_done = Some(done);
        match result {
            Ok(()) => {
                let _ = self.latency.record((done - scheduled).as_nanos().max(10) as u64);
            }
            Err(e) => {
                if matches!(e, Error::Busy { .. }) {
                    self.busy += 1;
                } else {
                    self.failed += 1;
                }
                self.first_failure.get_or_insert(e);
            }
        }
    }
}

/// One sending thread's calls in flight (`lowlat::InFlight`: a waker per place, made once) and
/// when each was scheduled.
struct Places<Fut: Future> {
    set: lowlat::InFlight<Fut>,
    scheduled: Vec<Instant>,
}

impl<Fut: Future<Output = Result<(), Error>> + Unpin> Places<Fut> {
    fn new(n: usize) -> Places<Fut> {
        Places { set: lowlat::InFlight::new(n), scheduled: vec![Instant::now(); n] }
    }

    fn in_flight(&self) -> usize {
        self.set.len()
    }

    /// Starts `call` (scheduled at `scheduled`, sent as it was made) in a free place; false,
    /// and nothing started, when every place is taken.
    fn start(&mut self, call: Fut, scheduled: Instant, run: &mut SenderRun) -> bool {
        let Ok(place) = self.set.push(call) else { return false };
        self.scheduled[place] = scheduled;
        run.peak_in_flight = run.peak_in_flight.max(self.in_flight());
        true
    }

    /// Polls every call woken since the last look.
    fn poll_woken(&mut self, run: &mut SenderRun) {
        let scheduled = &self.scheduled;
        self.set.poll(|place, result| run.finished(scheduled[place], result));
    }

    /// Sleeps until `until` at most, or until a call completes.
    fn park_until(&mut self, until: Instant, run: &mut SenderRun) {
        let wait = until.saturating_duration_since(Instant::now());
        if self.set.is_empty() {
            std::thread::park_timeout(wait);
        } else {
            let scheduled = &self.scheduled;
            self.set.wait(Some(wait), |place, result| run.finished(scheduled[place], result));
        }
    }
}

/// Runs the schedule: `starter(i)` makes sender `i`'s function, which begins one call and
/// returns it as a future (borrowing only what outlives the run, so that many of one sender's
/// calls can be in flight together). A warm-up failure ends the run with that error.
pub fn run<S, F, Fut>(spec: &OpenLoop, starter: F) -> Result<OpenLoopRun, Error>
where
    F: Fn(usize) -> S + Sync,
    S: FnMut() -> Fut,
    Fut: Future<Output = Result<(), Error>> + Unpin,
{
    let senders = spec.senders.max(1);
    let per_sender = spec.in_flight.max(1).div_ceil(senders);
    let shared = SharedSchedule::new(spec);
    let runs: Vec<Result<SenderRun, Error>> = on_sender_threads(spec, |i| -> Result<SenderRun, Error> {
        let mut start_call = starter(i);
        let mut places = Places::new(per_sender);
        let mut r = SenderRun::new();
        let mut warm = Ok(());
        for _ in 0..spec.warmup.div_ceil(senders as u64) {
            if warm.is_err() {
                break;
            }
            places.start(start_call(), Instant::now(), &mut r);
            while places.in_flight() > 0 {
                places.park_until(Instant::now() + Duration::from_millis(100), &mut r);
            }
            if let Some(e) = r.first_failure.take().filter(|e| !matches!(e, Error::Busy { .. })) {
                warm = Err(e);
            }
        }
        // The warm-up's counts are not the run's (reset once: a fresh run allocates its
        // histograms).
        if spec.warmup > 0 {
            r = SenderRun::new();
        }
        // Every sender waits here even after a failed warm-up, so none is left waiting for it.
        let start = shared.start();
        warm?;
        let mut due = shared.next_due(start);
        loop {
            places.poll_woken(&mut r);
            let Some(scheduled) = due else {
                if places.in_flight() == 0 {
                    break;
                }
                places.park_until(Instant::now() + Duration::from_millis(100), &mut r);
                continue;
            };
            let now = Instant::now();
            if now < scheduled {
                if scheduled - now > spec.spin_before_send {
                    places.park_until(scheduled - spec.spin_before_send, &mut r);
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            if places.set.is_full() {
                // Every place is in flight: the call waits for a reply (and will be late; the
                // lag says so).
                places.park_until(now + Duration::from_millis(1), &mut r);
                continue;
            }
            let lag = now - scheduled;
            let _ = r.lag.record(lag.as_nanos() as u64);
            r.late += u64::from(lag > LATE);
            r.sent += 1;
            places.start(start_call(), scheduled, &mut r);
            due = shared.next_due(start);
        }
        Ok(r)
    });
    let mut out = OpenLoopRun {
        latency: new_histogram(),
        lag: new_histogram(),
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
        in_flight: per_sender * senders,
        peak_in_flight: 0,
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
        out.peak_in_flight += r.peak_in_flight;
        if out.first_failure.is_none() {
            out.first_failure = r.first_failure;
        }
        last_done = last_done.max(r.last_done);
    }
    out.completed = out.latency.len();
    if let (Some(&start), Some(end)) = (shared.start.get(), last_done) {
        // Sent over the span the schedule covers (or longer, when the generator fell behind);
        // completed over the span until the last reply.
        let scheduled_s = shared.at.last().map_or(0.0, |&ns| ns as f64 / 1e9);
        out.wall_s = end.saturating_duration_since(start).as_secs_f64().max(1e-9);
        out.sent_per_s = out.sent as f64 / out.wall_s.max(scheduled_s).max(1e-9);
        out.completed_per_s = out.completed as f64 / out.wall_s;
    }
    Ok(out)
}

/// How well the machine itself keeps a schedule: [`schedule_floor`]'s measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduleFloor {
    /// The fraction of the schedule's sends more than [`LATE`] behind it.
    pub late_fraction: f64,
    /// The latest send, ns behind its time.
    pub max_lag_ns: u64,
}

/// The machine's floor for keeping `spec`'s schedule (DESIGN principle 10, applied to the
/// generator): as many threads as senders, placed as they are, that make no call and only wait
/// for each send's time as a sender does (asleep until [`OpenLoop::spin_before_send`] before
/// it, spinning the rest). What they miss, the host's own stalls made late (here a CPU stalls
/// in gaps over 10 µs about 1% of the time), whatever any generator does: a point is read
/// against this floor, measured beside it.
pub fn schedule_floor(spec: &OpenLoop) -> ScheduleFloor {
    let shared = SharedSchedule::new(spec);
    let counts: Vec<(u64, u64, u64)> = on_sender_threads(spec, |_| {
        let start = shared.start();
        let (mut sent, mut late, mut max_lag) = (0u64, 0u64, 0u64);
        while let Some(due) = shared.next_due(start) {
            let mut now = Instant::now();
            while now < due {
                if due - now > spec.spin_before_send {
                    std::thread::sleep(due - now - spec.spin_before_send);
                } else {
                    std::hint::spin_loop();
                }
                now = Instant::now();
            }
            let lag = now - due;
            sent += 1;
            late += u64::from(lag > LATE);
            max_lag = max_lag.max(lag.as_nanos() as u64);
        }
        (sent, late, max_lag)
    });
    let (sent, late) = counts.iter().fold((0, 0), |(s, l), c| (s + c.0, l + c.1));
    ScheduleFloor {
        late_fraction: if sent == 0 { 0.0 } else { late as f64 / sent as f64 },
        max_lag_ns: counts.iter().map(|c| c.2).max().unwrap_or(0),
    }
}

/// What a schedule's sending threads share: its send times, the next one no thread has taken,
/// and the moment they count from, fixed once every thread is ready.
struct SharedSchedule {
    at: Vec<u64>,
    next: AtomicU64,
    ready: Barrier,
    start: std::sync::OnceLock<Instant>,
}

impl SharedSchedule {
    fn new(spec: &OpenLoop) -> SharedSchedule {
        SharedSchedule {
            at: schedule(spec),
            next: AtomicU64::new(0),
            ready: Barrier::new(spec.senders.max(1)),
            start: std::sync::OnceLock::new(),
        }
    }

    /// Waits until every sending thread is ready, then gives the schedule's start: a little
    /// ahead, so the first sends are not late by the threads' start.
    fn start(&self) -> Instant {
        self.ready.wait();
        *self.start.get_or_init(|| Instant::now() + Duration::from_millis(2))
    }

    /// The scheduled time of the next call no sender has taken yet, if any is left.
    fn next_due(&self, start: Instant) -> Option<Instant> {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        self.at.get(k as usize).map(|&offset| start + Duration::from_nanos(offset))
    }
}

/// Runs `sender(i)` for each of `spec`'s sending threads, each placed as the plan says (pinned,
/// with a small timer slack), and gives their results in order. Each must call
/// [`SharedSchedule::start`] once, whatever else it does.
fn on_sender_threads<T: Send>(spec: &OpenLoop, sender: impl Fn(usize) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.senders.max(1))
            .map(|i| {
                let sender = &sender;
                s.spawn(move || {
                    if let Some(cpu) = spec.cpu {
                        let _ = lowlat_sys::pin_to_cpu(cpu);
                    }
                    // Best effort: without it sends are later, and the run says so.
                    let _ = lowlat_sys::set_timer_slack(SENDER_TIMER_SLACK);
                    sender(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("an open-loop sender panicked")).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    /// Ready once `d` has passed since its first poll (a thread of its own sleeps and wakes it,
    /// as a reply would).
    struct Delay {
        d: Duration,
        done: Option<Arc<AtomicBool>>,
    }

    impl Future for Delay {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            match &self.done {
                Some(done) if done.load(Ordering::Acquire) => Poll::Ready(()),
                Some(_) => Poll::Pending,
                None => {
                    let done = Arc::new(AtomicBool::new(false));
                    let (d, flag, waker) = (self.d, done.clone(), cx.waker().clone());
                    std::thread::spawn(move || {
                        std::thread::sleep(d);
                        flag.store(true, Ordering::Release);
                        waker.wake();
                    });
                    self.done = Some(done);
                    Poll::Pending
                }
            }
        }
    }

    fn delay(d: Duration) -> Delay {
        Delay { d, done: None }
    }

    impl Delay {
        /// The delay, then success: a call's future (boxed: `Unpin`, as calls' futures are).
        fn then_ok(self) -> Pin<Box<dyn Future<Output = Result<(), Error>>>> {
            Box::pin(async move {
                self.await;
                Ok(())
            })
        }
    }

    fn plan(rate: f64, calls: u64, senders: usize, in_flight: usize) -> OpenLoop {
        OpenLoop {
            rate,
            arrivals: Arrivals::Fixed,
            calls,
            senders,
            in_flight,
            warmup: 0,
            cpu: None,
            seed: 1,
            spin_before_send: SPIN_BEFORE_SEND,
        }
    }

    #[test]
    fn the_schedule_floor_waits_out_every_send_and_says_how_late_they_came() {
        // 400 sends, one every 100 µs, from two threads: 40 ms of schedule.
        let spec = plan(10_000.0, 400, 2, 2);
        let began = Instant::now();
        let floor = schedule_floor(&spec);
        assert!(began.elapsed() >= Duration::from_micros(39_900), "the schedule was not waited out");
        assert!((0.0..=1.0).contains(&floor.late_fraction), "{floor:?}");
        // A send far behind would mean the floor's own threads never ran; 100 ms is a generous
        // bound on a loaded two-CPU host.
        assert!(floor.max_lag_ns < 100_000_000, "{floor:?}");
        // Sleeping until the moment itself, as a sender told never to spin does, the sends
        // come after their times (a sleep never ends early).
        let asleep = schedule_floor(&OpenLoop { spin_before_send: Duration::ZERO, ..spec });
        assert!(asleep.max_lag_ns > 0, "{asleep:?}");
    }

    #[test]
    fn a_poisson_schedule_has_the_asked_rate_and_is_repeatable() {
        let spec = OpenLoop { arrivals: Arrivals::Poisson, seed: 7, ..plan(10_000.0, 20_000, 1, 1) };
        let a = schedule(&spec);
        assert_eq!(a, schedule(&spec));
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let rate = a.len() as f64 / (*a.last().unwrap() as f64 / 1e9);
        assert!((rate / 10_000.0 - 1.0).abs() < 0.05, "{rate} calls/s");
        let fixed = schedule(&OpenLoop { arrivals: Arrivals::Fixed, ..spec });
        assert_eq!(&fixed[..3], &[0, 100_000, 200_000]);
    }

    /// A slow call does not hold up the schedule while calls may be in flight, and is charged
    /// from its scheduled time; with one call in flight at most, the calls behind a slow one
    /// are sent late, and the run says so.
    #[test]
    fn latency_is_timed_from_the_schedule_and_lag_is_reported() {
        let slow_first = |_| {
            let mut n = 0;
            move || {
                n += 1;
                delay(if n == 1 { Duration::from_millis(20) } else { Duration::ZERO }).then_ok()
            }
        };
        let one = run(&plan(1_000.0, 40, 1, 1), slow_first).unwrap();
        assert_eq!((one.sent, one.completed, one.busy, one.failed), (40, 40, 0, 0));
        // The call due at 1 ms waited for the 20 ms one: sent ~19 ms late, and timed so.
        assert!(one.max_lag_ns() >= 15_000_000, "max lag {} ns", one.max_lag_ns());
        assert!(one.late >= 15 && !one.sustained(), "{}", one.describe());
        // ...and so were the calls behind it, each timed from its own scheduled time.
        assert!(one.latency.count_between(1_000_000, u64::MAX) >= 10, "{}", one.describe());
        // Calls in flight enough, on one sending thread: the slow call is one of them; the
        // others keep the schedule.
        let many = run(&plan(1_000.0, 40, 1, 8), slow_first).unwrap();
        assert_eq!(many.completed, 40);
        assert!(many.latency.max() >= 20_000_000, "the slow call counts from its scheduled time");
        assert!(many.latency.value_at_quantile(0.5) < 5_000_000, "{}", many.describe());
        assert!(many.max_lag_ns() < 10_000_000, "{}", many.describe());
        assert!(many.peak_in_flight >= 2, "{}", many.describe());
    }

    /// One sending thread keeps far more calls in flight than it has threads: 200 calls of 20 ms
    /// each at 2,000 a second are ~40 in flight at once, every one sent on schedule.
    #[test]
    fn one_sender_keeps_many_calls_in_flight() {
        let started = AtomicUsize::new(0);
        let r = run(&plan(2_000.0, 200, 1, 64), |_| {
            let started = &started;
            move || {
                started.fetch_add(1, Ordering::Relaxed);
                delay(Duration::from_millis(20)).then_ok()
            }
        })
        .unwrap();
        assert_eq!((r.senders, started.load(Ordering::Relaxed)), (1, 200));
        assert_eq!((r.sent, r.completed), (200, 200));
        assert!(r.peak_in_flight >= 30, "{}", r.describe());
        assert!(r.latency.value_at_quantile(0.5) < 60_000_000, "{}", r.describe());
        // The sender never waited for a call to finish: a sender that did would fall 20 ms
        // behind per call. (A busy test machine delays it a few ms at most: 2.7 ms seen while
        // the whole suite ran.)
        assert!(r.max_lag_ns() < 10_000_000, "{}", r.describe());
    }

    #[test]
    fn busy_and_other_failures_are_counted_apart() {
        let spec = OpenLoop { arrivals: Arrivals::Poisson, seed: 3, ..plan(20_000.0, 300, 2, 4) };
        let call_site = lowlat::CallSite { uri: "udp://x".into(), program: 1, version: 1, proc_no: 0, name: None };
        let r = run(&spec, |_| {
            let call_site = call_site.clone();
            let mut n = 0u32;
            move || {
                n += 1;
                let result = match n % 3 {
                    0 => Err(Error::Busy { call: call_site.clone(), message: None }),
                    1 => Err(Error::Timeout {
                        call: call_site.clone(),
                        after: Duration::from_millis(1),
                        execution: lowlat::Execution::Unknown,
                    }),
                    _ => Ok(()),
                };
                std::future::ready(result)
            }
        })
        .unwrap();
        assert_eq!(r.sent, 300);
        assert_eq!(r.busy + r.failed + r.completed, 300);
        assert!(r.busy >= 90 && r.failed >= 90 && r.completed >= 90, "{}", r.describe());
    }

    #[test]
    fn a_failed_warm_up_ends_the_run_with_its_error() {
        let spec = OpenLoop { warmup: 4, ..plan(1_000.0, 10, 2, 4) };
        let r = run(&spec, |_| {
            || std::future::ready(Err(Error::Io { op: "warm-up".into(), source: std::io::Error::other("refused") }))
        });
        assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
    }
}
