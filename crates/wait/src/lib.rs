//! Spin, then block: the waiting policy every lowlat transport shares.
//!
//! Thekkath & Levy (§3.1.2) spin the caller for a while before putting it to sleep, and suggest
//! choosing from the measured round trip: spin when the answer is likely to come soon, block at
//! once when it is not. Blocking on this kind of machine costs ~10 µs just to wake an idle CPU, so
//! a good budget is worth more than any other micro-optimisation on the wait path.
//!
//! A policy over closures, not a wrapper of any system call: the caller's `try_op` polls its
//! ring or socket and its `block` sleeps however its transport sleeps. Shared-memory, socket and
//! raw Ethernet transports all wait through [`Spinner`], so RPC and raw ping-pong over one
//! transport are compared like for like. This crate must never depend on another lowlat crate
//! (every transport depends on it).

#![warn(missing_docs)]

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a waiter spins before it blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpinPolicy {
    /// Never spin: block at once (`--spin-us 0`).
    Block,
    /// Spin for this long, then block (`--spin-us N`).
    Budget(Duration),
    /// Spin until the deadline: busy-polling (`--spin-us forever`).
    Forever,
    /// Spin for about twice the recently observed wait, capped; block at once when waits are long
    /// (the default).
    #[default]
    Adaptive,
}

impl SpinPolicy {
    /// Builds a policy from a number of microseconds (0 = block).
    pub fn from_micros(us: u64) -> Self {
        if us == 0 {
            SpinPolicy::Block
        } else {
            SpinPolicy::Budget(Duration::from_micros(us))
        }
    }
}

impl fmt::Display for SpinPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpinPolicy::Block => write!(f, "0"),
            SpinPolicy::Budget(d) => write!(f, "{}", d.as_micros()),
            SpinPolicy::Forever => write!(f, "forever"),
            SpinPolicy::Adaptive => write!(f, "adaptive"),
        }
    }
}

/// The error for a `--spin-us` value that is neither a number, `adaptive` nor `forever`.
#[derive(Debug, thiserror::Error)]
#[error("invalid spin budget {0:?}: expected microseconds (0 = always block), `adaptive` or `forever`")]
pub struct ParseSpinPolicyError(String);

impl FromStr for SpinPolicy {
    type Err = ParseSpinPolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "adaptive" | "auto" => Ok(SpinPolicy::Adaptive),
            "forever" | "poll" => Ok(SpinPolicy::Forever),
            _ => s.parse::<u64>().map(SpinPolicy::from_micros).map_err(|_| ParseSpinPolicyError(s.to_string())),
        }
    }
}

/// The adaptive budget never spins longer than this: past it, blocking is cheaper than burning
/// a CPU that another thread of the same machine could use.
pub const ADAPTIVE_CAP: Duration = Duration::from_micros(100);
/// The adaptive budget never spins less than this when it spins at all.
const ADAPTIVE_FLOOR: Duration = Duration::from_micros(5);

/// A waiter's state: the policy plus, for `Adaptive`, a smoothed estimate of how long waits last.
#[derive(Clone, Debug)]
pub struct Spinner {
    policy: SpinPolicy,
    /// Exponentially weighted mean of recent waits, in nanoseconds (1/8 gain, as TCP's SRTT).
    mean_wait_ns: u64,
    /// When the last wait saw readiness, if it read the clock then (see [`Spinner::ready_at`]).
    ready_at: Option<Instant>,
    /// Polls a spinning wait makes before it first reads the clock ([`CLOCK_EVERY`]).
    clock_free: u32,
    /// Whether this waiter waits for answers to its own calls ([`Spinner::awaiting_answers`]).
    awaits_answers: bool,
}

impl Spinner {
    /// A waiter with no history: `Adaptive` starts by assuming a fast peer (10 µs waits).
    pub fn new(policy: SpinPolicy) -> Self {
        if policy != SpinPolicy::Block {
            Crowd::learn_cpus();
        }
        Spinner {
            policy,
            // Start by assuming a fast peer: the first few waits teach the truth.
            mean_wait_ns: 10_000,
            ready_at: None,
            clock_free: CLOCK_EVERY,
            awaits_answers: false,
        }
    }

    /// This waiter, waiting for the answers to its thread's calls: an adaptive wait in a crowd
    /// (the process's waits as many as its thread's CPUs) then keeps yielding for up to
    /// [`CROWDED_CAP`] before it blocks, where any other wait blocks past [`ADAPTIVE_CAP`] (see
    /// [`CROWDED_CAP`] for why).
    pub fn awaiting_answers(mut self) -> Self {
        self.awaits_answers = true;
        self
    }

    /// This waiter, whose spinning waits never leave their clock-free polls (four billion of
    /// them). Only for the build that counts lowlat's call path in instructions under callgrind,
    /// whose threads take turns, so that an answer takes many polls to come: its waits then end
    /// as a fast peer's do natively, within the clock-free polls, and the count is that common
    /// case's. Such a wait never times out.
    #[doc(hidden)]
    pub fn never_leaving_clock_free_polls(mut self) -> Self {
        self.clock_free = u32::MAX;
        self
    }

    /// The policy it was made with.
    pub fn policy(&self) -> SpinPolicy {
        self.policy
    }

    /// The spin budget for the next wait outside a crowd. A caller's adaptive wait
    /// ([`awaiting_answers`](Self::awaiting_answers)) that finds the process's waits as many as
    /// its CPUs spins longer, under [`CROWDED_CAP`].
    #[inline]
    pub fn budget(&self) -> Option<Duration> {
        match self.policy {
            SpinPolicy::Block => Some(Duration::ZERO),
            SpinPolicy::Budget(d) => Some(d),
            SpinPolicy::Forever => None,
            SpinPolicy::Adaptive => Some(self.adaptive_budget(ADAPTIVE_CAP)),
        }
    }

    /// The adaptive budget under `cap`: twice the mean wait, none when waits are that long.
    #[inline]
    fn adaptive_budget(&self, cap: Duration) -> Duration {
        let mean = Duration::from_nanos(self.mean_wait_ns);
        if mean >= cap {
            Duration::ZERO
        } else {
            (mean * 2).clamp(ADAPTIVE_FLOOR, cap)
        }
    }

    /// How long a wait in the middle of a message streamed through a ring spins before it
    /// sleeps: the peer is writing or reading the rest right now, a copy of a few microseconds
    /// away, whatever the waits between calls have taught the adaptive budget (a client whose
    /// calls each take a millisecond learns to block at once, and a 1 MiB message then slept
    /// and was woken for each of its chunks, at half the rate of a spinning pair).
    pub fn mid_message_budget(&self) -> Duration {
        match self.policy {
            SpinPolicy::Block => Duration::ZERO,
            SpinPolicy::Budget(d) => d,
            SpinPolicy::Forever | SpinPolicy::Adaptive => ADAPTIVE_CAP,
        }
    }

    /// The spin budget of a wait that has joined the crowd: a caller's adaptive wait in a crowd
    /// spins (yielding) under [`CROWDED_CAP`] instead of [`ADAPTIVE_CAP`].
    #[inline]
    fn budget_now(&self) -> Option<Duration> {
        if self.awaits_answers && self.policy == SpinPolicy::Adaptive && Crowd::crowded() {
            Some(self.adaptive_budget(CROWDED_CAP))
        } else {
            self.budget()
        }
    }

    /// The moment the last [`wait_on`](Self::wait_on) saw its value, when it read the clock to
    /// time the wait (a wait that ended within its first polls reads none): a caller that needs
    /// the time anyway saves a clock read.
    pub fn ready_at(&self) -> Option<Instant> {
        self.ready_at
    }

    /// Records how long a completed wait took (from the start of waiting to readiness).
    #[inline]
    pub fn observe(&mut self, waited: Duration) {
        let w = waited.as_nanos().min(u64::MAX as u128) as u64;
        // mean += (w - mean) / 8, in integers.
        self.mean_wait_ns = self.mean_wait_ns - self.mean_wait_ns / 8 + w / 8;
    }

    /// Spins on `try_op` for the budget, then alternates `block` (which sleeps until the resource
    /// may be ready or the given timeout passes) with `try_op` until it yields a value or the
    /// deadline passes. Returns `Ok(None)` on deadline.
    ///
    /// `try_op` must never block; `block(None)` means "no deadline".
    pub fn wait<T, E>(
        &mut self,
        deadline: Option<Instant>,
        mut try_op: impl FnMut() -> Result<Option<T>, E>,
        mut block: impl FnMut(Option<Duration>) -> Result<(), E>,
    ) -> Result<Option<T>, E> {
        self.wait_on(deadline, &mut (), |_| try_op(), |_, t| block(t))
    }

    /// [`wait`](Self::wait) for a `try_op` and a `block` that both need the same mutable state
    /// (a socket with its receive buffer, say), passed to each as `ctx`.
    pub fn wait_on<C: ?Sized, T, E>(
        &mut self,
        deadline: Option<Instant>,
        ctx: &mut C,
        try_op: impl FnMut(&mut C) -> Result<Option<T>, E>,
        block: impl FnMut(&mut C, Option<Duration>) -> Result<(), E>,
    ) -> Result<Option<T>, E> {
        self.wait_on_lazy(|| deadline, ctx, try_op, block)
    }

    /// [`wait_on`](Self::wait_on) with a deadline worked out only when the wait first reads the
    /// clock, past its clock-free polls: a caller that would read the clock just to know its
    /// deadline reads none when the value comes quickly.
    #[inline]
    pub fn wait_on_lazy<C: ?Sized, T, E>(
        &mut self,
        deadline: impl FnOnce() -> Option<Instant>,
        ctx: &mut C,
        mut try_op: impl FnMut(&mut C) -> Result<Option<T>, E>,
        mut block: impl FnMut(&mut C, Option<Duration>) -> Result<(), E>,
    ) -> Result<Option<T>, E> {
        self.ready_at = None;
        // Reading the clock costs ~20-30 ns in a VM, more than a poll of a shared-memory ring, and
        // a fast peer answers within a few polls. So busy-polling, and the adaptive policy while
        // it spins at all, read no clock in their first CLOCK_EVERY polls (on a ring they take
        // about a microsecond; on a socket, 32 system calls, some microseconds, far below any
        // deadline): an answer found there is learnt as a wait of zero, which keeps the adaptive
        // budget at its floor, the right budget for a peer that fast. A fixed budget is timed
        // from the first poll on, so that `--spin-us N` means N. Past the clock-free polls, the
        // clock is looked at every CLOCK_EVERY polls.
        //
        // `try_op` is called from one place only, so that the compiler can inline it here: the
        // poll is the whole of a spinning wait, and a call per poll shows in a round trip.
        let mut deadline = Some(deadline);
        // Clock-free polls left; unknown until the first poll has come back empty.
        let mut clock_free_left: Option<u32> = None;
        let mut timed: Option<Timed> = None;
        loop {
            if let Some(v) = try_op(ctx)? {
                match &timed {
                    None => self.observe(Duration::ZERO),
                    Some(t) => {
                        let now = Instant::now();
                        self.observe(now - t.start);
                        self.ready_at = Some(now);
                    }
                }
                return Ok(Some(v));
            }
            let t = match &mut timed {
                Some(t) => t,
                None => {
                    let left = clock_free_left.get_or_insert_with(|| self.clock_free_polls());
                    if *left > 0 {
                        *left -= 1;
                        std::hint::spin_loop();
                        continue;
                    }
                    let crowd = Crowd::join();
                    let start = Instant::now();
                    let deadline = deadline.take().expect("the clock starts once per wait")();
                    let spin_until = self.budget_now().map(|b| start + b);
                    let spinning = spin_until.is_none_or(|s| start < s);
                    timed.insert(Timed { start, deadline, spin_until, spinning, polls: 0, _crowd: crowd })
                }
            };
            if !t.spinning || t.polls % CLOCK_EVERY == CLOCK_EVERY - 1 {
                let now = Instant::now();
                if t.deadline.is_some_and(|d| now >= d) {
                    return Ok(None);
                }
                t.spinning = t.spin_until.is_none_or(|s| now < s);
                if !t.spinning {
                    block(ctx, t.deadline.map(|d| d.saturating_duration_since(now)))?;
                }
            } else if Crowd::crowded() && t.start.elapsed() >= YIELD_AFTER {
                #[cfg(test)]
                tests::YIELDS.set(tests::YIELDS.get() + 1);
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            t.polls = t.polls.wrapping_add(1);
        }
    }

    /// How many polls the next wait makes before it first reads the clock (none for a fixed
    /// budget or for blocking, which are timed from the first poll; see
    /// [`wait_on_lazy`](Self::wait_on_lazy)): a caller that polls on its own before waiting may
    /// make as many, and record an answer found there as a wait of zero with
    /// [`observe`](Self::observe), as the wait would have (if none comes, the wait that follows
    /// makes its own).
    #[inline]
    pub fn clock_free_polls(&self) -> u32 {
        let clock_free = match self.policy {
            SpinPolicy::Forever => true,
            SpinPolicy::Adaptive => self.budget().is_some_and(|b| !b.is_zero()),
            SpinPolicy::Block | SpinPolicy::Budget(_) => false,
        };
        if clock_free {
            self.clock_free
        } else {
            0
        }
    }
}

/// Spins until `ready` says yes or `budget` passes (the clock read once in 32 polls); returns
/// whether it said yes.
pub fn spin_until(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if budget.is_zero() {
        return ready();
    }
    let end = Instant::now() + budget;
    let mut polls = 0u32;
    loop {
        if ready() {
            return true;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(CLOCK_EVERY) && Instant::now() >= end {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// Polls a spinning wait makes before it reads the clock, and between two reads after that.
const CLOCK_EVERY: u32 = 32;

/// A crowded wait ([`Crowd`]) yields its CPU only once it has lasted this long past its
/// clock-free polls: a handover between two threads costs a few microseconds here, so a wait
/// for a peer on another CPU, whose answer comes within one or two, is cheaper spun than
/// yielded. Measured on two vCPUs, 8 and 16 callers pinned to one CPU over shared memory, a
/// server on the other: yielding as soon as the wait was crowded made 0.73-0.85x of one caller's
/// calls per second, p99 up to 56 µs; never yielding, 0.93-0.97x, p99 0.7-4.3 µs. A wait on a
/// peer starved of CPU by its spinning callers lasts far longer, and still gives its CPU away.
const YIELD_AFTER: Duration = Duration::from_micros(5);

/// How long a caller's adaptive wait in a crowd (the process's waits as many as its thread's
/// CPUs) spins, yielding, before it blocks: twice its mean wait under this cap, where an
/// uncrowded wait's cap is [`ADAPTIVE_CAP`].
///
/// In a crowd a wait lasts long because the process's other callers went first, not because the
/// peer is slow, and blocking then costs more than it saves: the peer's answer wakes the blocked
/// caller, the kernel places a thread woken by a socket or futex on the waker's CPU, and it
/// preempts the very server it waits for. Measured on two vCPUs, 16 unpinned callers of a udp
/// server pinned to one: with waits blocking past 100 µs the server was preempted 34,000-48,000
/// times per 200,000 calls, waited on its CPU's run queue for a third of the run, and made 0.7x
/// of one caller's calls per second; yielding for up to this long instead, 0.94-1.0x (0.3 ms did as
/// well there). A peer that is truly slow (waits of a millisecond or more) still finds its
/// callers asleep.
pub const CROWDED_CAP: Duration = Duration::from_millis(1);

/// A wait past its clock-free polls: when it started reading the clock and what it must meet.
struct Timed {
    start: Instant,
    deadline: Option<Instant>,
    spin_until: Option<Instant>,
    spinning: bool,
    polls: u32,
    _crowd: Crowd,
}

/// The waits of this process past their clock-free polls, spinning or blocked.
static WAITING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The CPUs this thread may run on (its affinity), once a spinning waiter was made on it;
    /// 0 until then.
    static CPUS: Cell<usize> = const { Cell::new(0) };
}

/// The CPUs the first thread that made a spinning waiter may run on; 0 until then.
static PROCESS_CPUS: AtomicUsize = AtomicUsize::new(0);

/// One wait counted in [`WAITING`] while it lasts.
///
/// Waiters that outnumber the CPUs they may use take, by spinning, the CPU from the very threads
/// they wait for: another caller on the same CPU whose reply is already there, or a server on the
/// same machine. Counted with every other wait of the process, a spinning wait that finds as
/// many waits as its thread has CPUs, and has lasted [`YIELD_AFTER`], yields its CPU between
/// polls instead of pausing (measured on two vCPUs, unpinned callers of a server pinned to one:
/// calls per second from 4-16 threads fell to 0.25-0.6x of one thread's without it). A
/// blocked wait counts too, as it is soon woken to run:
/// counting only the spinning ones kept unpinned tcp callers at 0.5x from 4 threads on, where
/// counting both gives 0.8-1.0x; blocking instead of yielding, from twice as many waits as
/// CPUs, did worse than yielding.
struct Crowd;

impl Crowd {
    fn join() -> Crowd {
        WAITING.fetch_add(1, Ordering::Relaxed);
        Crowd
    }

    /// Reads the CPUs this thread may run on, once: `available_parallelism` may allocate (it
    /// reads the cgroup's quota), so it is read where waiters are made (a serving thread as it
    /// starts, a caller as it opens its slots), never in a wait. A thread that made no spinning
    /// waiter goes by the process's first such thread.
    fn learn_cpus() {
        if CPUS.get() == 0 {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            CPUS.set(n);
            let _ = PROCESS_CPUS.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Whether this process's long waits are at least as many as this thread's CPUs.
    #[inline]
    fn crowded() -> bool {
        let waiting = WAITING.load(Ordering::Relaxed);
        if waiting < 2 {
            return false;
        }
        let cpus = match CPUS.get() {
            0 => PROCESS_CPUS.load(Ordering::Relaxed),
            n => n,
        };
        waiting >= cpus
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// The yields of this thread's crowded waits.
        pub(super) static YIELDS: Cell<u64> = const { Cell::new(0) };
    }

    #[test]
    fn parses_cli_values() {
        assert_eq!("0".parse::<SpinPolicy>().unwrap(), SpinPolicy::Block);
        assert_eq!("25".parse::<SpinPolicy>().unwrap(), SpinPolicy::Budget(Duration::from_micros(25)));
        assert_eq!("forever".parse::<SpinPolicy>().unwrap(), SpinPolicy::Forever);
        assert_eq!("adaptive".parse::<SpinPolicy>().unwrap(), SpinPolicy::Adaptive);
        let err = "fast".parse::<SpinPolicy>().unwrap_err().to_string();
        assert!(err.contains("fast") && err.contains("adaptive"), "{err}");
    }

    #[test]
    fn spinning_until_ready_ends_when_it_is_or_when_the_budget_is_spent() {
        let mut polls = 0;
        assert!(spin_until(Duration::from_secs(10), || {
            polls += 1;
            polls == 1000
        }));
        assert_eq!(polls, 1000);
        let t = Instant::now();
        assert!(!spin_until(Duration::from_millis(2), || false));
        assert!(t.elapsed() >= Duration::from_millis(2));
        // No budget: one look.
        let mut looks = 0;
        assert!(!spin_until(Duration::ZERO, || {
            looks += 1;
            false
        }));
        assert_eq!(looks, 1);
        // A mid-message wait spins under every policy but blocking, adaptive ones included
        // whatever they have learnt.
        let mut s = Spinner::new(SpinPolicy::Adaptive);
        for _ in 0..50 {
            s.observe(Duration::from_millis(2));
        }
        assert_eq!(s.budget(), Some(Duration::ZERO));
        assert_eq!(s.mid_message_budget(), ADAPTIVE_CAP);
        assert_eq!(Spinner::new(SpinPolicy::Block).mid_message_budget(), Duration::ZERO);
        let fixed = Duration::from_micros(7);
        assert_eq!(Spinner::new(SpinPolicy::Budget(fixed)).mid_message_budget(), fixed);
    }

    #[test]
    fn adaptive_budget_follows_observed_waits() {
        let mut s = Spinner::new(SpinPolicy::Adaptive);
        for _ in 0..64 {
            s.observe(Duration::from_micros(8));
        }
        let b = s.budget().unwrap();
        assert!(b >= Duration::from_micros(14) && b <= Duration::from_micros(17), "{b:?}");
        // Long waits: spinning would only burn the CPU, so the budget drops to zero.
        for _ in 0..64 {
            s.observe(Duration::from_millis(5));
        }
        assert_eq!(s.budget(), Some(Duration::ZERO));
        // Short again: it recovers.
        for _ in 0..200 {
            s.observe(Duration::from_micros(3));
        }
        let b = s.budget().unwrap();
        assert!(b >= Duration::from_micros(5) && b <= Duration::from_micros(7), "{b:?}");
    }

    #[test]
    fn wait_blocks_after_budget_and_honours_deadline() {
        let mut s = Spinner::new(SpinPolicy::Block);
        let mut blocks = 0;
        let r: Result<Option<()>, ()> = s.wait(
            Some(Instant::now() + Duration::from_millis(5)),
            || Ok(None),
            |t| {
                blocks += 1;
                std::thread::sleep(t.unwrap().min(Duration::from_millis(1)));
                Ok(())
            },
        );
        assert_eq!(r, Ok(None));
        assert!(blocks >= 1);
        let mut n = 0;
        let r: Result<Option<u32>, ()> = s.wait(
            None,
            || {
                n += 1;
                Ok(if n == 3 { Some(7) } else { None })
            },
            |_| Ok(()),
        );
        assert_eq!(r, Ok(Some(7)));
    }

    /// A wait whose resource is ready on poll `k`.
    fn answer_on_poll(s: &mut Spinner, k: u32) {
        let mut n = 0;
        let r: Result<Option<()>, ()> = s.wait(
            None,
            || {
                n += 1;
                Ok((n == k).then_some(()))
            },
            |_| Ok(()),
        );
        assert_eq!(r, Ok(Some(())));
    }

    #[test]
    fn a_lazy_deadline_is_worked_out_only_when_the_wait_reads_the_clock() {
        let lazy_wait = |s: &mut Spinner, answer_on: u32, deadline: Option<Instant>| {
            let (mut asked, mut n) = (0, 0);
            let r: Result<Option<()>, ()> = s.wait_on_lazy(
                || {
                    asked += 1;
                    deadline
                },
                &mut (),
                |_| {
                    n += 1;
                    Ok((n == answer_on).then_some(()))
                },
                |_, t| {
                    std::thread::sleep(t.unwrap_or(Duration::from_millis(1)).min(Duration::from_millis(1)));
                    Ok(())
                },
            );
            (r, asked)
        };
        // An answer within the clock-free polls never asks for the deadline.
        let mut s = Spinner::new(SpinPolicy::Forever);
        assert_eq!(lazy_wait(&mut s, 3, None), (Ok(Some(())), 0));
        // A slower one asks once, and the deadline it gets still ends the wait.
        assert_eq!(lazy_wait(&mut s, 1000, None), (Ok(Some(())), 1));
        let t = Instant::now();
        let (r, asked) = lazy_wait(&mut s, u32::MAX, Some(Instant::now() + Duration::from_millis(20)));
        assert_eq!((r, asked), (Ok(None), 1));
        assert!(t.elapsed() >= Duration::from_millis(20), "{:?}", t.elapsed());
        // Blocking reads the clock at once, so it asks at once.
        let mut s = Spinner::new(SpinPolicy::Block);
        assert_eq!(lazy_wait(&mut s, 3, None), (Ok(Some(())), 1));
    }

    #[test]
    fn only_a_fixed_budget_times_its_first_polls() {
        let answer_on_third_poll = |s: &mut Spinner| answer_on_poll(s, 3);
        // Adaptive, while spinning: a fast answer costs no clock read and is learnt as a zero
        // wait, which holds the budget at its floor.
        let mut s = Spinner::new(SpinPolicy::Adaptive);
        for _ in 0..64 {
            answer_on_third_poll(&mut s);
            assert_eq!(s.ready_at(), None);
        }
        assert_eq!(s.budget(), Some(ADAPTIVE_FLOOR));
        // A fixed budget is timed from the first poll, so `--spin-us N` means N.
        let mut s = Spinner::new(SpinPolicy::Budget(Duration::from_millis(10)));
        answer_on_third_poll(&mut s);
        assert!(s.ready_at().is_some());
        // Adaptive after long waits does not spin at all, so it has no clock-free polls either.
        let mut s = Spinner::new(SpinPolicy::Adaptive);
        for _ in 0..64 {
            s.observe(Duration::from_millis(5));
        }
        answer_on_third_poll(&mut s);
        assert!(s.ready_at().is_some());
    }

    #[test]
    fn ready_at_is_the_moment_a_timed_wait_ended() {
        let mut s = Spinner::new(SpinPolicy::Forever);
        let r: Result<Option<()>, ()> = s.wait(None, || Ok(Some(())), |_| Ok(()));
        assert_eq!(r, Ok(Some(())));
        assert_eq!(s.ready_at(), None, "an immediate answer reads no clock");
        let before = Instant::now();
        answer_on_poll(&mut s, 200);
        let t = s.ready_at().expect("a wait past the first polls is timed");
        assert!(t >= before && t <= Instant::now());
    }

    /// A caller's adaptive wait in a crowd, whose waits have lasted longer than an uncrowded
    /// wait would spin, spins on (yielding) for twice its mean wait instead of blocking: a
    /// blocked caller woken by its server preempts that server. Any other wait blocks.
    #[test]
    fn a_callers_long_wait_in_a_crowd_spins_where_any_other_wait_blocks() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let used_to = |wait: Duration, mut s: Spinner| {
            for _ in 0..64 {
                s.observe(wait);
            }
            s
        };
        let join_a_crowd = || -> Vec<Crowd> { (0..cpus.max(2)).map(|_| Crowd::join()).collect() };
        let blocks_in_a_200us_wait = |s: &mut Spinner| {
            let until = Instant::now() + Duration::from_micros(200);
            let mut blocks = 0;
            let r: Result<Option<()>, ()> = s.wait(
                None,
                || Ok((Instant::now() >= until).then_some(())),
                |t| {
                    blocks += 1;
                    std::thread::sleep(t.unwrap_or(Duration::from_micros(50)).min(Duration::from_micros(50)));
                    Ok(())
                },
            );
            assert_eq!(r, Ok(Some(())));
            blocks
        };
        // Waits of 400 µs: past ADAPTIVE_CAP, within CROWDED_CAP.
        let long = Duration::from_micros(400);
        let mut caller = used_to(long, Spinner::new(SpinPolicy::Adaptive).awaiting_answers());
        let mut other = used_to(long, Spinner::new(SpinPolicy::Adaptive));
        assert_eq!(caller.budget(), Some(Duration::ZERO), "uncrowded, waits this long block at once");
        let crowd = join_a_crowd();
        assert_eq!(blocks_in_a_200us_wait(&mut caller), 0, "a caller's wait in a crowd blocked");
        assert!(blocks_in_a_200us_wait(&mut other) > 0, "a wait for no answer of its own spun in a crowd");
        drop(crowd);
        // A truly slow peer: waits past CROWDED_CAP block at once, crowd or not.
        let mut slow = used_to(CROWDED_CAP * 2, Spinner::new(SpinPolicy::Adaptive).awaiting_answers());
        let crowd = join_a_crowd();
        assert!(blocks_in_a_200us_wait(&mut slow) > 0, "a caller of a slow peer spun");
        drop(crowd);
    }

    /// Waits that outnumber the CPUs are seen as a crowd while they spin, and each leaves the
    /// count however it ends (a value, a deadline, an error from `block`): a wait left counted
    /// would make every later wait of the process give its CPU away.
    #[test]
    fn waits_that_outnumber_the_cpus_are_a_crowd_and_leave_it_however_they_end() {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Barrier};
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n = cpus.max(2) + 1;
        let go = Arc::new(AtomicBool::new(false));
        let crowded = Arc::new(AtomicUsize::new(0));
        let all_waiting = Arc::new(Barrier::new(n + 1));
        let waiters: Vec<_> = (0..n)
            .map(|_| {
                let (go, crowded, all_waiting) = (go.clone(), crowded.clone(), all_waiting.clone());
                std::thread::spawn(move || {
                    let mut s = Spinner::new(SpinPolicy::Forever);
                    let mut told = false;
                    let r: Result<Option<()>, ()> = s.wait(
                        None,
                        || {
                            if !told && WAITING.load(Ordering::Relaxed) >= n {
                                told = true;
                                crowded.fetch_add(Crowd::crowded() as usize, Ordering::Relaxed);
                                all_waiting.wait();
                            }
                            Ok(go.load(Ordering::Relaxed).then_some(()))
                        },
                        |_| Ok(()),
                    );
                    r
                })
            })
            .collect();
        all_waiting.wait();
        go.store(true, Ordering::Relaxed);
        for w in waiters {
            assert_eq!(w.join().unwrap(), Ok(Some(())));
        }
        assert_eq!(crowded.load(Ordering::Relaxed), n, "{n} spinning waits on {cpus} CPUs are a crowd to each");

        // In a crowd, a wait answered soon after its clock-free polls spins on (a peer on another
        // CPU answers faster than a handover between threads); one that lasts yields its CPU.
        let crowd: Vec<Crowd> = (0..cpus.max(2)).map(|_| Crowd::join()).collect();
        let mut s = Spinner::new(SpinPolicy::Forever);
        YIELDS.set(0);
        answer_on_poll(&mut s, CLOCK_EVERY + 8);
        assert_eq!(YIELDS.get(), 0, "a crowded wait answered 8 polls past its clock-free ones yielded");
        let until = Instant::now() + Duration::from_millis(2);
        let r: Result<Option<()>, ()> = s.wait(None, || Ok((Instant::now() >= until).then_some(())), |_| Ok(()));
        assert_eq!(r, Ok(Some(())));
        assert!(YIELDS.get() > 0, "a crowded wait of 2 ms never yielded");
        drop(crowd);

        // A wait that spins to its deadline, and one that spins and then blocks, in vain, leave
        // the count too.
        let mut s = Spinner::new(SpinPolicy::Forever);
        let r: Result<Option<()>, ()> =
            s.wait(Some(Instant::now() + Duration::from_millis(2)), || Ok(None), |_| Ok(()));
        assert_eq!(r, Ok(None));
        let mut s = Spinner::new(SpinPolicy::Budget(Duration::from_micros(200)));
        let r: Result<Option<()>, &str> = s.wait(None, || Ok(None), |_| Err("gone"));
        assert_eq!(r, Err("gone"));
        // Other tests of this binary wait too, for milliseconds at most: the count must come
        // back to zero.
        let until = Instant::now() + Duration::from_secs(10);
        while WAITING.load(Ordering::Relaxed) != 0 {
            assert!(Instant::now() < until, "{} waits still counted", WAITING.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
