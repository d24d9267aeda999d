//! Seats: on an endpoint of several threads, each serving thread's state (its transport, engine
//! and dispatcher: its *seat*) is held by one thread at a time, and taken by another when a
//! procedure blocks the thread holding it, so that the procedure holds up only its own call.
//!
//! Riddoch's dispatcher model (`../shared/seeds/004_*`, §6.5: a pool of threads, one waiting
//! for events, another woken only when there is work) fitted to a sharded endpoint. A seat stays
//! with its thread, with no hand-off, and an inline procedure runs with the seat *lent*: its
//! arguments copied out, its result written into the thread's own buffer, the seat's word saying
//! "lent" and its lock let go. When the procedure returns, its thread takes the seat back (a
//! compare-and-swap on the word, then the lock, which nobody else can hold then) and answers the
//! call there.
//!
//! The serving threads look at the others' words: every [`STALL`] or so while busy (a clock
//! read every [`LOOK_EVERY`] turns to know when), and at the end of each wait that found
//! nothing, which ends after [`QUIET`], while idle. A seat lent from one look to the next (the
//! same generation) is wanted, and a free thread (the endpoint's spare, or a serving thread
//! whose seat was taken), asleep until then, is woken to take it and serves it from then on:
//! the other sessions of a blocked thread wait one to two [`STALL`]s (one to two [`QUIET`]s if
//! the other threads had nothing to do), once, not the length of the procedure. The blocked
//! thread, when its procedure returns, finds its seat gone, hands its result to the seat's
//! doorbell as a worker does, and is a free thread from then on. Nothing wakes on a timer while
//! the threads are busy (a spare looking every millisecond took the CPU from the spinning
//! threads of a two-vCPU machine: udp null p99 4.5 -> 18-24 µs).
//!
//! The common call pays for this with copies of its arguments and its result and four
//! uncontended atomic operations (the word's store and compare-and-swap, the lock's release and
//! acquisition), on an endpoint of several threads only: an endpoint of one thread has no seat
//! and runs its procedures where they arrive.
//!
//! Not chosen: work stealing call by call puts every session's state behind locks the threads
//! contend for (the endpoint is sharded so that nothing on the call path is shared); handing
//! every call to a pool costs a thread wake-up a call (50-100 µs on a VM). Procedures known to
//! be slow still belong on the worker pool (`long_running`): a stalled seat is found only after
//! [`STALL`]; one spare covers one blocked seat at a time (a second waits until a thread comes
//! free); and a stall is seen only by a serving thread not itself blocked (with every thread of
//! an endpoint inside a procedure, its sessions wait for the first to return).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a seat stays lent before a free thread takes it: looked at about once a period, so
/// a seat is taken after one to two of them. Short enough that the sessions of a blocked thread
/// wait little more than a scheduling delay.
pub(crate) const STALL: Duration = Duration::from_millis(1);

/// A busy serving thread reads the clock, to know whether a look at the other seats is due,
/// once in this many turns.
const LOOK_EVERY: u32 = 64;

/// How long an idle serving thread waits before it looks at the other seats: a seat stalled
/// while every other is idle is taken after one to two of these. Any wake-up a millisecond
/// takes the CPU from a spinning thread of a two-vCPU machine often enough to show at the 99th
/// percentile (udp null with two serving threads: p99 4.5 -> 18-24 µs; tcp 7.3 -> 31-33 µs);
/// one in ten milliseconds does not.
pub(crate) const QUIET: Duration = Duration::from_millis(10);

/// How long a free thread sleeps at most before it looks again whether every seat has ended
/// (the thread ending the last one wakes it; this bounds what a lost wake-up costs).
const FREE_NAP: Duration = Duration::from_millis(100);

/// The room made in each thread's buffers for arguments and for results, at its start.
const SCRATCH_ROOM: usize = 64 << 10;

/// A seat's word: its state in the low two bits, a generation above them (one more each lend).
const HELD: u64 = 0;
const LENT: u64 = 1;
const ENDED: u64 = 2;
const STATE: u64 = 3;
const GENERATION: u64 = 1 << 2;

/// What a seat does, as the threads that take turns holding it see it.
pub(crate) trait Seat: Send {
    /// A call to run with the seat lent: owns what the procedure needs (its arguments are in
    /// the thread's [`Scratch`]).
    type Call;
    /// Where the answer to a call goes when its seat was taken while it ran.
    type Away;
    /// One turn of serving: a wait and what it found.
    fn turn(&mut self) -> Turned;
    /// The next call to run with the seat lent, its arguments copied into `scratch.args`.
    fn take_lent(&mut self, scratch: &mut Scratch) -> Option<Self::Call>;
    /// Runs `call` (the seat lent: nothing of it is touched), its result into `scratch.reply`.
    fn run_lent(call: &Self::Call, scratch: &mut Scratch) -> lowlat_proto::Status;
    /// Answers `call`, run with the seat lent and taken back.
    fn answer_lent(&mut self, call: Self::Call, status: lowlat_proto::Status, result: &[u8]);
    /// Where answers go while another thread holds the seat.
    fn away(&mut self) -> Self::Away;
    /// Hands the answer to `call` to the thread that holds the seat now.
    fn deliver(away: &Self::Away, call: Self::Call, status: lowlat_proto::Status, result: &[u8]);
}

/// What a turn of a seat did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turned {
    /// Served what its wait found.
    Served,
    /// Found nothing until its wait's deadline.
    Quiet,
    /// The seat has ended (the endpoint stopped or drained, or its transport failed).
    Ended,
}

/// The seats of one endpoint, one per serving thread.
pub(crate) struct Seats<S> {
    slots: Box<[Slot<S>]>,
    /// The CPUs the serving threads are pinned to: a thread that takes a seat pins itself as
    /// the seat's home thread was (`ServerConfig::pin_cpus`).
    pins: Vec<usize>,
    /// A seat a look found stalled (its index and its word then), for a free thread to take.
    wanted: Mutex<Option<(usize, u64)>>,
    /// Where free threads sleep until a seat is wanted or every seat has ended.
    free: Condvar,
}

/// One seat with its word. Aligned so that two seats never share a cache line (a holder writes
/// its word and its lock twice a call).
#[repr(align(128))]
struct Slot<S> {
    word: AtomicU64,
    /// None once every seat has ended and its home thread let go of it (the threads of an
    /// endpoint let go of their transports at once, not one after the other).
    seat: Mutex<Option<S>>,
}

/// A thread's own buffers for the calls it runs with a seat lent (the seat may be taken while
/// the procedure runs, so nothing the procedure reads or writes may lie in it), and its looks
/// at the other seats.
pub(crate) struct Scratch {
    pub args: Vec<u8>,
    pub reply: Vec<u8>,
    /// The seats' words as this thread's last look saw them.
    seen: Vec<u64>,
    /// When it last looked.
    looked: Instant,
    /// Turns served since it last read the clock to know whether a look is due.
    busy: u32,
}

impl<S: Seat> Seats<S> {
    pub fn new(seats: Vec<S>, pins: Vec<usize>) -> Seats<S> {
        Seats {
            slots: seats.into_iter().map(|s| Slot { word: AtomicU64::new(HELD), seat: Mutex::new(Some(s)) }).collect(),
            pins,
            wanted: Mutex::new(None),
            free: Condvar::new(),
        }
    }

    /// A seat that will never be served (its thread could not start): ended.
    pub fn abandon(&self, index: usize) {
        self.end(&self.slots[index]);
    }

    /// The life of the serving thread whose seat is `index`: serves it, then (it ended, or was
    /// taken) is a free thread until every seat has ended.
    pub fn home(&self, index: usize) {
        let mut scratch = self.scratch();
        let slot = &self.slots[index];
        self.serve(slot, slot.word.load(Ordering::Acquire), &mut scratch);
        // A seat that ended keeps its transport until every seat has: a udp socket that left
        // its group while the others drain would change which thread the kernel hands their
        // callers' datagrams to (a retransmission would reach a thread that never saw its call
        // and refuse it as stopping). Then each thread lets go of its own, all at once.
        self.free(&mut scratch);
        drop(lock(&slot.seat).take());
    }

    /// The spare's life: a free thread until every seat has ended.
    pub fn spare(&self) {
        self.free(&mut self.scratch());
    }

    /// A thread's buffers, made at its start with room for the calls most run, so that the
    /// first it runs with a seat it took allocate nothing.
    fn scratch(&self) -> Scratch {
        Scratch {
            args: Vec::with_capacity(SCRATCH_ROOM),
            reply: Vec::with_capacity(SCRATCH_ROOM),
            seen: self.slots.iter().map(|s| s.word.load(Ordering::Relaxed)).collect(),
            looked: Instant::now(),
            busy: 0,
        }
    }

    fn all_ended(&self) -> bool {
        self.slots.iter().all(|s| s.word.load(Ordering::Acquire) == ENDED)
    }

    /// Marks a seat ended (the last thing its holder does with it) and wakes the free threads,
    /// which end with the last seat.
    fn end(&self, slot: &Slot<S>) {
        slot.word.store(ENDED, Ordering::Release);
        let _wanted = lock(&self.wanted);
        self.free.notify_all();
    }

    /// Sleeps until a seat is wanted, takes and serves it, and again, until every seat has
    /// ended.
    fn free(&self, scratch: &mut Scratch) {
        loop {
            let mut wanted = lock(&self.wanted);
            let (i, w) = loop {
                if self.all_ended() {
                    return;
                }
                if let Some(w) = wanted.take() {
                    break w;
                }
                wanted = self.free.wait_timeout(wanted, FREE_NAP).unwrap_or_else(|p| p.into_inner()).0;
            };
            drop(wanted);
            let slot = &self.slots[i];
            let held = w - LENT + GENERATION;
            // Taken only if still lent as the look saw it (its procedure has not returned).
            if slot.word.compare_exchange(w, held, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                self.take(i, held, scratch);
            }
        }
    }

    /// Serves the seat `i`, just taken (its word now `held`), until it ends or is taken again.
    #[cold]
    fn take(&self, i: usize, held: u64, scratch: &mut Scratch) {
        if !self.pins.is_empty() {
            let _ = lowlat_sys::pin_to_cpu(self.pins[i % self.pins.len()]);
        }
        tracing::debug!(
            target: "lowlat::server",
            thread = i,
            "a procedure held its serving thread longer than {STALL:?}: another thread serves its sessions",
        );
        scratch.looked = Instant::now();
        self.serve(&self.slots[i], held, scratch);
    }

    /// After a turn that `turned` so, from the seat of `mine`: looks at the other seats if it
    /// is time, and asks a free thread to take one lent since the last look.
    #[inline]
    fn look(&self, mine: &Slot<S>, turned: Turned, scratch: &mut Scratch) {
        if turned == Turned::Served {
            scratch.busy += 1;
            if scratch.busy < LOOK_EVERY {
                return;
            }
        }
        scratch.busy = 0;
        let now = Instant::now();
        if now.duration_since(scratch.looked) < STALL {
            return;
        }
        scratch.looked = now;
        for (i, slot) in self.slots.iter().enumerate() {
            let w = slot.word.load(Ordering::Acquire);
            if w & STATE == LENT && w == scratch.seen[i] && !std::ptr::eq(slot, mine) {
                *lock(&self.wanted) = Some((i, w));
                self.free.notify_one();
            }
            scratch.seen[i] = w;
        }
    }

    /// Serves the seat of `slot`, held by this thread (its word `held`), running its inline
    /// calls with it lent, until it ends or is taken meanwhile.
    fn serve(&self, slot: &Slot<S>, mut held: u64, scratch: &mut Scratch) {
        // A serving loop that panics (a defect: procedures' panics are caught) ends its seat,
        // so that the endpoint's other threads still end when it stops.
        let _ends = EndOnPanic { seats: self, slot };
        let mut guard = lock(&slot.seat);
        let Some(seat) = guard.as_mut() else { return };
        let away = seat.away();
        loop {
            let Some(seat) = guard.as_mut() else { return };
            let turned = seat.turn();
            if turned == Turned::Ended {
                drop(guard);
                self.end(slot);
                return;
            }
            self.look(slot, turned, scratch);
            let Some(call) = seat.take_lent(scratch) else { continue };
            // From here until it is taken back, the seat is not this thread's: the procedure
            // reads this thread's copy of its arguments and writes this thread's buffer.
            let lent = held + GENERATION + LENT;
            drop(guard);
            slot.word.store(lent, Ordering::Release);
            let status = S::run_lent(&call, scratch);
            held = lent - LENT;
            if slot.word.compare_exchange(lent, held, Ordering::Acquire, Ordering::Relaxed).is_err() {
                // Another thread serves the seat now: the answer goes to it as a worker's does.
                S::deliver(&away, call, status, &scratch.reply);
                return;
            }
            // Nobody else holds the lock: only a thread that took the word takes the lock.
            guard = lock(&slot.seat);
            if let Some(seat) = guard.as_mut() {
                seat.answer_lent(call, status, &scratch.reply);
            }
        }
    }
}

/// Ends its seat if dropped while its thread panics.
struct EndOnPanic<'a, S: Seat> {
    seats: &'a Seats<S>,
    slot: &'a Slot<S>,
}

impl<S: Seat> Drop for EndOnPanic<'_, S> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.seats.end(self.slot);
        }
    }
}

/// A lock of the seats': a thread that panicked holding it left what it guards as it was (a
/// seat's next holder serves it as it finds it).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lowlat_proto::Status;

    use super::*;

    /// A seat whose calls come from a list, ended after `ends_after` turns. A call's
    /// "procedure" sleeps as many milliseconds as its argument says.
    struct Fake {
        calls: Vec<u8>,
        turns: u64,
        ends_after: u64,
        /// Calls answered, by which thread (shared: the seat's lock is its holder's).
        answered: Arc<Mutex<Vec<(u8, std::thread::ThreadId)>>>,
        /// Calls whose answers went to the seat's holder from a thread it was taken from.
        delivered: Arc<Mutex<Vec<u8>>>,
        /// The turn at which the serving loop panics (0: never).
        panics_at: u64,
    }

    impl Fake {
        fn new(calls: Vec<u8>, ends_after: u64) -> Fake {
            Fake { calls, turns: 0, ends_after, answered: Arc::default(), delivered: Arc::default(), panics_at: 0 }
        }
    }

    impl Seat for Fake {
        type Call = u8;
        type Away = Arc<Mutex<Vec<u8>>>;
        fn turn(&mut self) -> Turned {
            self.turns += 1;
            assert!(self.turns != self.panics_at, "a defect in the serving loop");
            if self.turns >= self.ends_after {
                Turned::Ended
            } else if self.calls.is_empty() {
                std::thread::sleep(Duration::from_micros(100));
                Turned::Quiet
            } else {
                Turned::Served
            }
        }
        fn take_lent(&mut self, scratch: &mut Scratch) -> Option<u8> {
            let c = (!self.calls.is_empty()).then(|| self.calls.remove(0))?;
            scratch.args.clear();
            scratch.args.push(c);
            Some(c)
        }
        fn run_lent(call: &u8, scratch: &mut Scratch) -> Status {
            std::thread::sleep(Duration::from_millis(u64::from(scratch.args[0])));
            scratch.reply.clear();
            scratch.reply.push(*call);
            Status::Ok
        }
        fn answer_lent(&mut self, call: u8, _: Status, result: &[u8]) {
            assert_eq!(result, [call]);
            self.answered.lock().unwrap().push((call, std::thread::current().id()));
        }
        fn away(&mut self) -> Self::Away {
            self.delivered.clone()
        }
        fn deliver(away: &Self::Away, call: u8, _: Status, result: &[u8]) {
            assert_eq!(result, [call]);
            away.lock().unwrap().push(call);
        }
    }

    /// Serves `seats` with a thread each and a spare; returns once every seat has ended.
    fn serve_all(seats: &Seats<Fake>) {
        std::thread::scope(|s| {
            for i in 0..seats.slots.len() {
                s.spawn(move || seats.home(i));
            }
            s.spawn(|| seats.spare());
        });
    }

    #[test]
    fn a_seat_lent_past_the_stall_is_served_by_the_spare_and_its_blocked_call_answered_once() {
        // On seat 0 a call that blocks 250 ms, then quick ones: those are answered while it
        // still runs, once seat 1's thread has seen the stall and the spare taken the seat.
        let blocked = Fake::new(vec![250, 0, 0, 0], 4_000);
        let (answered, delivered) = (blocked.answered.clone(), blocked.delivered.clone());
        let seats = Seats::new(vec![blocked, Fake::new(Vec::new(), 4_000)], Vec::new());
        let started = Instant::now();
        let answered_at = std::thread::scope(|s| {
            s.spawn(|| serve_all(&seats));
            let deadline = Instant::now() + Duration::from_secs(5);
            while answered.lock().unwrap().len() < 3 {
                assert!(Instant::now() < deadline, "the calls behind the blocked one were not answered");
                std::thread::sleep(Duration::from_millis(1));
            }
            started.elapsed()
        });
        assert!(
            answered_at < Duration::from_millis(200),
            "the quick calls waited for the blocked one: {answered_at:?}"
        );
        // The blocked call's answer went to the seat's holder, once.
        assert_eq!(*delivered.lock().unwrap(), [250]);
        assert!(seats.all_ended());
    }

    #[test]
    fn a_seat_taken_back_at_once_is_never_taken() {
        let quick = Fake::new(vec![0; 50], 300);
        let (answered, delivered) = (quick.answered.clone(), quick.delivered.clone());
        let seats = Seats::new(vec![quick, Fake::new(Vec::new(), 300)], Vec::new());
        serve_all(&seats);
        let answered = answered.lock().unwrap();
        assert_eq!(answered.len(), 50);
        let first = answered[0].1;
        assert!(answered.iter().all(|(_, t)| *t == first), "a quick call was answered elsewhere");
        assert!(delivered.lock().unwrap().is_empty());
    }

    #[test]
    fn a_serving_loop_that_panics_ends_its_seat_and_the_others_still_end() {
        let panicking = Fake { panics_at: 5, ..Fake::new(Vec::new(), 300) };
        let seats = Arc::new(Seats::new(vec![panicking, Fake::new(Vec::new(), 300)], Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let all = seats.clone();
        std::thread::spawn(move || {
            let joined = std::thread::scope(|s| {
                let home = s.spawn(|| all.home(0));
                let other = s.spawn(|| all.home(1));
                let spare = s.spawn(|| all.spare());
                (home.join().is_err(), other.join().is_ok(), spare.join().is_ok())
            });
            let _ = tx.send(joined);
        });
        let joined = rx.recv_timeout(Duration::from_secs(10)).expect("the other threads did not end");
        assert_eq!(joined, (true, true, true));
        assert!(seats.all_ended());
    }
}
