//! A client's call slots: the one pool every client uses, whatever its protocol (lowlat's own,
//! ONC RPC) and whether its calls block or are awaited.
//!
//! A slot is the unit of a call in flight: whoever holds it touches nothing shared until it
//! gives it back. It is claimed with one locked instruction and given back with a plain store
//! (a standard mutex's release is a second locked instruction, ~5 ns more per call here). A
//! call that finds every slot busy waits to be told of a release, never for a timer: a blocking
//! one sleeps on a condition variable, an async one leaves its waker. The releasing side only
//! reads a counter of waiters after its plain store; the waiting side orders itself against that
//! by bumping the counter, making every running thread pass a full barrier
//! ([`lowlat_sys::heavy_barrier`]) and looking at the slots once more, so the rare path pays for
//! the ordering and the call path pays nothing (on a kernel without the barrier, a waiter looks
//! again every [`FALLBACK_RECHECK`]).
//!
//! An async call in flight has no thread to hold its slot's lock (a future moves between
//! threads, a lock guard may not): its slot is *lent* ([`SlotPool::lend`]), its lock free, and
//! every claim passes it by until it is given back.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use spin::mutex::{SpinMutex, SpinMutexGuard};

/// How often a waiter looks at the slots again where the kernel offers no process-wide barrier
/// (a release may then go unseen).
pub(crate) const FALLBACK_RECHECK: Duration = Duration::from_millis(1);

thread_local! {
    /// The index of the slot this thread's blocking call claimed last, in whichever pool: its
    /// next blocking call looks there first. Threads that share a client then each come back to
    /// their own slot, free since their last call, instead of all scanning from the first past
    /// the slots of callers descheduled mid-call, with a locked instruction each on a line
    /// another CPU may hold. Measured on two vCPUs, 16 callers of one shared-memory client
    /// pinned to one CPU: a third of the samples of the call's own code fell on that scan's
    /// locked instruction; 16 unpinned callers made 0.89-0.92x of one caller's calls per second
    /// in most runs scanning from the first slot, 0.94-0.99x starting at their own. Async and
    /// batched calls keep a thread's many slots in flight at once, so theirs scan from the first
    /// (starting at the last one instead made 16 in flight from one thread 7% slower).
    static LAST_CLAIMED: Cell<usize> = const { Cell::new(0) };
}

/// The slots of one client.
pub(crate) struct SlotPool<S> {
    slots: Box<[SpinMutex<S>]>,
    /// Whether each slot has its channel open (set once, never cleared): a call prefers those.
    opened: Box<[AtomicBool]>,
    /// Whether each slot is lent to an async call (read and written under the slot's lock).
    lent: Box<[AtomicBool]>,
    /// Blocking calls and async calls waiting for a release.
    waiters: AtomicUsize,
    /// The async calls among them not yet woken, first come first woken, each with its place's
    /// number ([`InLine`]).
    wakers: Mutex<Line>,
    free: Condvar,
    free_lock: Mutex<()>,
    /// A housekeeper ([`sweep`](Self::sweep)) is looking at the slots, one at a time.
    housekeeping: AtomicBool,
    /// Lent slots given back: async calls finished (`super::pacing` reads it as progress).
    returned: AtomicU64,
    /// The waker of the async call parked in the reactor on each lent slot, if one is.
    parked: Box<[SpinMutex<Option<Waker>>]>,
    /// How many of them there are.
    parked_count: AtomicUsize,
}

/// A slot held: given back when dropped, and a waiter told.
pub(crate) struct Claimed<'a, S> {
    /// Always `Some` until dropped: taken in `drop` so the lock is released before the waiters
    /// are read (the order the waiting side relies on).
    guard: Option<SpinMutexGuard<'a, S>>,
    index: usize,
    pool: &'a SlotPool<S>,
}

impl<S> Claimed<'_, S> {
    /// The slot's index in its pool.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl<S> std::ops::Deref for Claimed<'_, S> {
    type Target = S;
    #[inline(always)]
    fn deref(&self) -> &S {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<S> std::ops::DerefMut for Claimed<'_, S> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut S {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<S> Drop for Claimed<'_, S> {
    #[inline]
    fn drop(&mut self) {
        // The plain store first, then the waiters: see the module's docs. The fence keeps the
        // compiler from reading the waiters before the store (the CPU may; the barrier covers it).
        drop(self.guard.take());
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        if self.pool.waiters.load(Ordering::SeqCst) > 0 {
            self.pool.notify();
        }
    }
}

impl<S> SlotPool<S> {
    /// A pool of `slots`, those for which `opened` says so counted as having a channel.
    pub fn new(slots: Vec<S>, opened: impl Fn(usize) -> bool) -> SlotPool<S> {
        let n = slots.len();
        SlotPool {
            slots: slots.into_iter().map(SpinMutex::new).collect(),
            opened: (0..n).map(|i| AtomicBool::new(opened(i))).collect(),
            lent: (0..n).map(|_| AtomicBool::new(false)).collect(),
            waiters: AtomicUsize::new(0),
            wakers: Mutex::new(Line::default()),
            free: Condvar::new(),
            free_lock: Mutex::new(()),
            housekeeping: AtomicBool::new(false),
            returned: AtomicU64::new(0),
            parked: (0..n).map(|_| SpinMutex::new(None)).collect(),
            parked_count: AtomicUsize::new(0),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slot `index` now has a channel open.
    pub fn mark_opened(&self, index: usize) {
        self.opened[index].store(true, Ordering::Relaxed);
    }

    /// The first slot free now (not held, not lent), among the open ones only if `open_only`.
    #[inline]
    pub fn try_claim(&self, open_only: bool) -> Option<Claimed<'_, S>> {
        let slots = self.slots.iter().zip(self.opened.iter()).zip(self.lent.iter()).enumerate();
        slots
            .filter(|(_, ((_, opened), _))| !open_only || opened.load(Ordering::Relaxed))
            // Lent to an async call: passed by without the lock's locked instruction (with 64
            // calls in flight, 63 of them on every claim), then looked at again under the
            // lock, which orders the look after the lend.
            .filter(|(_, (_, lent))| !lent.load(Ordering::Relaxed))
            .find_map(|(index, ((slot, _), lent))| {
                let guard = slot.try_lock().filter(|_| !lent.load(Ordering::Relaxed))?;
                Some(Claimed { guard: Some(guard), index, pool: self })
            })
    }

    /// A free slot for a blocking call, waiting for one to be released until `deadline` (read
    /// only once the wait is longer than a moment); `None` once it has passed. The slot this
    /// thread claimed last here ([`LAST_CLAIMED`]) is looked at first.
    #[inline]
    pub fn claim(&self, deadline: impl FnMut() -> Instant) -> Option<Claimed<'_, S>> {
        match self.try_claim_at(LAST_CLAIMED.get()) {
            Some(c) => Some(c),
            None => self.claim_other(deadline),
        }
    }

    /// Slot `index`, if it exists, is open and is free now.
    #[inline(always)]
    fn try_claim_at(&self, index: usize) -> Option<Claimed<'_, S>> {
        let slot = self.slots.get(index)?;
        let lent = &self.lent[index];
        if !self.opened[index].load(Ordering::Relaxed) || lent.load(Ordering::Relaxed) {
            return None;
        }
        let guard = slot.try_lock().filter(|_| !lent.load(Ordering::Relaxed))?;
        Some(Claimed { guard: Some(guard), index, pool: self })
    }

    /// A slot for a blocking call whose last slot was taken: it becomes this thread's.
    #[cold]
    #[inline(never)]
    fn claim_other(&self, deadline: impl FnMut() -> Instant) -> Option<Claimed<'_, S>> {
        let c = match self.try_claim(true) {
            Some(c) => c,
            None => self.claim_slow(deadline)?,
        };
        LAST_CLAIMED.set(c.index);
        Some(c)
    }

    #[cold]
    #[inline(never)]
    fn claim_slow(&self, mut deadline: impl FnMut() -> Instant) -> Option<Claimed<'_, S>> {
        // A slot with an open channel is worth a short wait: it is usually busy only for the
        // moment a housekeeper looks at it (however long that takes: it may be sending, or be
        // descheduled), and a fresh slot costs a socket, a server slot and allocations. Threads
        // that find every open slot busy for longer, with no housekeeper at work, open new ones.
        const PATIENCE: u32 = 256;
        let mut round = 0;
        loop {
            let housekeeping = self.housekeeping.load(Ordering::Acquire);
            let patient = round < PATIENCE || housekeeping;
            if let Some(c) = self.try_claim(patient) {
                return Some(c);
            }
            if patient {
                round += 1;
                if housekeeping {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            // Every slot is busy: sleep until one is released (or the deadline).
            let deadline = deadline();
            let g = self.free_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.waiters.fetch_add(1, Ordering::SeqCst);
            let ordered = lowlat_sys::heavy_barrier();
            let found = self.try_claim(false);
            let now = Instant::now();
            if found.is_none() && now < deadline {
                let wait = deadline - now;
                let wait = if ordered { wait } else { wait.min(FALLBACK_RECHECK) };
                let _ = self.free.wait_timeout(g, wait);
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            if found.is_some() {
                return found;
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }

    /// A free slot for an async call made now, unless calls are waiting for one (they come
    /// first: a call made when another completes would otherwise take the slot it freed, again
    /// and again, while the waiting ones wait to their deadlines).
    pub fn try_claim_now(&self) -> Option<Claimed<'_, S>> {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            return None;
        }
        self.try_claim(true).or_else(|| self.try_claim(false))
    }

    /// A free slot for an async call, or `None` with `waker` in line to be woken by a release
    /// (the caller parks until then or its deadline, and looks again when woken). `line` is
    /// the call's place in line, kept by the call (give it to [`leave_line`](Self::leave_line)
    /// if the call is dropped). The second value: how soon to look again regardless, where a
    /// release may go unseen.
    pub fn poll_claim(&self, waker: &Waker, line: &mut InLine) -> (Option<Claimed<'_, S>>, Option<Duration>) {
        // In line, a call is counted among the waiters until it has its slot: a release wakes the
        // first in line, and calls made meanwhile do not pass it (`try_claim_now`).
        if line.0.is_some() || self.waiters.load(Ordering::SeqCst) == 0 {
            if let Some(c) = self.try_claim(true).or_else(|| self.try_claim(false)) {
                self.out_of_line(line);
                return (Some(c), None);
            }
        }
        {
            let mut l = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
            match line.0 {
                None => {
                    l.next += 1;
                    let id = l.next;
                    line.0 = Some(id);
                    self.waiters.fetch_add(1, Ordering::SeqCst);
                    l.waiting.push_back((id, waker.clone()));
                }
                // Woken, and a slot was taken before it looked: first again.
                Some(id) if !l.waiting.iter().any(|(i, _)| *i == id) => l.waiting.push_front((id, waker.clone())),
                Some(_) => {}
            }
        }
        let recheck = (!lowlat_sys::heavy_barrier()).then_some(FALLBACK_RECHECK);
        // Looked at again once in line: a slot released meanwhile is not missed. It is the first
        // in line's: taken if that is this call, else the first is woken for it (a release that
        // came before this call was counted may have woken no one).
        if let Some(c) = self.try_claim(false) {
            if self.first_in_line(line) {
                self.out_of_line(line);
                return (Some(c), None);
            }
            // Given back: the release wakes the first in line.
            drop(c);
        }
        (None, recheck)
    }

    /// Whether the call is first in line (or woken, and so out of the queue).
    fn first_in_line(&self, line: &InLine) -> bool {
        let Some(id) = line.0 else { return false };
        let l = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        l.waiting.front().is_none_or(|(first, _)| *first == id) || !l.waiting.iter().any(|(i, _)| *i == id)
    }

    /// A call in line for a slot is dropped: it leaves the line (and if it had been woken, for a
    /// slot it will not take, the next in line is woken instead).
    pub fn leave_line(&self, line: &mut InLine) {
        if line.0.is_some() && !self.out_of_line(line) {
            self.notify();
        }
    }

    /// Takes the call out of line; whether it was still there (not woken).
    fn out_of_line(&self, line: &mut InLine) -> bool {
        let Some(id) = line.0.take() else { return false };
        let mut l = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        let found = l.waiting.iter().position(|(i, _)| *i == id).and_then(|at| l.waiting.remove(at)).is_some();
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        found
    }

    /// Slot `index` for a look that does not call (its counters, an async call's own lent
    /// slot), waiting for a call that holds it to end: by spinning briefly, then sleeping, since
    /// that call may take as long as its deadline.
    pub fn hold(&self, index: usize) -> Claimed<'_, S> {
        let slot = &self.slots[index];
        let mut tries = 0u32;
        loop {
            if let Some(guard) = slot.try_lock() {
                return Claimed { guard: Some(guard), index, pool: self };
            }
            tries += 1;
            if tries < 128 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Each slot in turn, held as [`hold`](Self::hold) holds it.
    pub fn hold_each(&self) -> impl Iterator<Item = Claimed<'_, S>> + '_ {
        (0..self.slots.len()).map(|i| self.hold(i))
    }

    /// Lends the slot `c` holds to its async call while the call is in flight: once `c` is
    /// dropped, no claim takes the slot until [`give_back`](Self::give_back) (the call itself
    /// takes it with [`hold`](Self::hold)).
    pub fn lend(&self, c: &Claimed<'_, S>) {
        self.lent[c.index].store(true, Ordering::Relaxed);
    }

    /// Ends the lending of the slot `c` holds, and gives it back.
    pub fn give_back(&self, c: Claimed<'_, S>) {
        self.lent[c.index].store(false, Ordering::Relaxed);
        // Only that it changed matters (`returned`), not an exact count: a load and a store,
        // no locked instruction, even when two threads give back at once.
        self.returned.store(self.returned.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// The async call on lent slot `index` parks in the reactor, to be woken by `waker`: another
    /// call of the client that finishes wakes it at once if its reply is there
    /// ([`wake_parked`](Self::wake_parked)).
    pub fn parked(&self, index: usize, waker: &Waker) {
        let mut p = self.parked[index].lock();
        if p.replace(waker.clone()).is_none() {
            self.parked_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The async call on slot `index` is polled again (or gone): no longer parked.
    pub fn unparked(&self, index: usize) {
        if self.parked_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        if self.parked[index].lock().take().is_some() {
            self.parked_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Wakes the calls parked on lent slots other than `except` whose reply `ready` says is
    /// there: the thread that polls finds them in its own pass, and the reactor's hop (50-100
    /// µs on a VM, and a parked task comes back thousands of others' calls later) is left to
    /// calls whose replies have not come. Costs one load when none is parked.
    pub fn wake_parked(&self, except: usize, mut ready: impl FnMut(&mut S) -> bool) {
        if self.parked_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        for (index, waker) in self.parked.iter().enumerate() {
            if index == except || waker.lock().is_none() {
                continue;
            }
            // A slot held now is being polled by its own call (or looked at): passed by.
            let Some(mut slot) = self.slots[index].try_lock() else { continue };
            if !ready(&mut slot) {
                continue;
            }
            drop(slot);
            if let Some(w) = waker.lock().take() {
                self.parked_count.fetch_sub(1, Ordering::Relaxed);
                w.wake();
            }
        }
    }

    /// A number that changes whenever an async call gives its slot back.
    pub fn returned(&self) -> u64 {
        self.returned.load(Ordering::Relaxed)
    }

    /// Runs `look` on every slot no call holds now, telling waiting calls that a housekeeper is
    /// at work (so they wait for it rather than open new slots).
    pub fn sweep(&self, mut look: impl FnMut(&mut S)) {
        self.housekeeping.store(true, Ordering::Release);
        for slot in self.slots.iter() {
            if let Some(mut g) = slot.try_lock() {
                look(&mut g);
            }
        }
        self.housekeeping.store(false, Ordering::Release);
    }

    /// Wakes a blocking waiter and the first async call in line.
    #[cold]
    #[inline(never)]
    fn notify(&self) {
        {
            let _g = self.free_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.free.notify_one();
        }
        let first = self.wakers.lock().unwrap_or_else(|p| p.into_inner()).waiting.pop_front();
        if let Some((_, w)) = first {
            w.wake();
        }
    }
}

/// An async call's place in line for a slot ([`SlotPool::poll_claim`]): its number, while it
/// is in line.
#[derive(Default, Debug)]
pub(crate) struct InLine(Option<u64>);

/// The async calls waiting for a slot.
#[derive(Default)]
struct Line {
    waiting: VecDeque<(u64, Waker)>,
    /// The last number given.
    next: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A look at a slot (its counters) while a call holds it waits for the call to end, and
    /// does not hold it longer.
    #[test]
    fn a_look_at_a_slot_waits_for_the_call_that_holds_it() {
        let pool = SlotPool::new(vec![7u64], |_| true);
        let released = AtomicBool::new(false);
        std::thread::scope(|s| {
            let mut call = pool.try_claim(true).expect("free");
            s.spawn(|| {
                let g = pool.hold(0);
                assert!(released.load(Ordering::Acquire), "held while the call still had the slot");
                assert_eq!(*g, 8);
            });
            std::thread::sleep(Duration::from_millis(30));
            *call = 8;
            released.store(true, Ordering::Release);
            drop(call);
        });
        assert!(pool.try_claim(true).is_some(), "the look gave the slot back");
    }

    /// Threads that share a client come back each to the slot it claimed last, where the
    /// others' calls do not touch it, not to the first slot free.
    #[test]
    fn a_thread_claims_first_the_slot_it_claimed_last() {
        let pool = SlotPool::new(vec![(); 4], |_| true);
        let deadline = || Instant::now() + Duration::from_secs(5);
        let (a, b) = (pool.claim(deadline).expect("free"), pool.claim(deadline).expect("free"));
        assert_eq!((a.index(), b.index()), (0, 1));
        drop(a);
        drop(b);
        for _ in 0..3 {
            assert_eq!(pool.claim(deadline).map(|c| c.index()), Some(1), "slot 0 is free, but 1 was this thread's");
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                let first = pool.claim(deadline).expect("free");
                assert_eq!(first.index(), 0, "another thread starts from the first");
                drop(first);
                // Its own slot held by someone else, the thread takes the first one free, and
                // comes back to that one.
                let held = pool.hold(0);
                assert_eq!(pool.claim(deadline).map(|c| c.index()), Some(1));
                drop(held);
                assert_eq!(pool.claim(deadline).map(|c| c.index()), Some(1));
            });
        });
    }

    /// A blocking call that finds every slot busy is woken by the release itself, not by a
    /// timer: with a deadline a minute away, each of many hand-overs completes at once.
    #[test]
    fn a_waiting_call_is_woken_by_the_release() {
        let pool = Arc::new(SlotPool::new(vec![0u64], |_| true));
        let deadline = Instant::now() + Duration::from_secs(60);
        let rounds = 200;
        let other = {
            let pool = pool.clone();
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    let mut c = pool.claim(|| deadline).expect("woken long before the deadline");
                    *c += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        };
        let began = Instant::now();
        for _ in 0..rounds {
            let mut c = pool.claim(|| deadline).expect("woken long before the deadline");
            *c += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        other.join().unwrap();
        assert_eq!(*pool.hold(0), 2 * rounds);
        // 400 hand-overs of 200 µs each: a missed wake-up would cost the deadline (a minute).
        assert!(began.elapsed() < Duration::from_secs(30), "a release went unseen: {:?}", began.elapsed());
    }

    /// A slot lent to an async call is passed by until it is given back, and a waiting async
    /// call's waker is woken by the giving back.
    #[test]
    fn a_lent_slot_is_passed_by_and_its_return_wakes_a_waiter() {
        struct Flag(AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let pool = SlotPool::new(vec![(), ()], |i| i == 0);
        let first = pool.try_claim(true).expect("slot 0");
        assert_eq!(first.index(), 0);
        pool.lend(&first);
        drop(first);
        let second = pool.try_claim(false).expect("slot 1, the lent one passed by");
        assert_eq!(second.index(), 1);
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let (none, _) = pool.poll_claim(&waker, &mut InLine::default());
        assert!(none.is_none(), "one slot lent, the other held");
        pool.give_back(pool.hold(0));
        assert!(flag.0.load(Ordering::SeqCst), "the giving back woke the waiting call");
        assert_eq!(pool.try_claim(true).map(|c| c.index()), Some(0));
        drop(second);
    }

    /// A call made while others wait in line for a slot does not pass them; the first in line
    /// is woken by a release and takes the slot; one woken and then dropped passes the wake on.
    #[test]
    fn calls_wait_for_a_slot_in_line() {
        struct Flag(AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flags: Vec<Arc<Flag>> = (0..2).map(|_| Arc::new(Flag(AtomicBool::new(false)))).collect();
        let wakers: Vec<Waker> = flags.iter().map(|f| Waker::from(f.clone())).collect();
        let pool = SlotPool::new(vec![()], |_| true);
        let held = pool.try_claim_now().expect("the only slot");
        let (mut first, mut second) = (InLine::default(), InLine::default());
        assert!(pool.poll_claim(&wakers[0], &mut first).0.is_none());
        assert!(pool.poll_claim(&wakers[1], &mut second).0.is_none());
        drop(held);
        assert!(flags[0].0.load(Ordering::SeqCst), "the release woke the first in line");
        assert!(!flags[1].0.load(Ordering::SeqCst), "and only the first");
        assert!(pool.try_claim_now().is_none(), "a call made now passed the ones in line");
        // The first, woken, is dropped before it looks: the second is woken instead.
        pool.leave_line(&mut first);
        assert!(flags[1].0.load(Ordering::SeqCst), "the wake was passed on");
        let got = pool.poll_claim(&wakers[1], &mut second).0.expect("the slot, for the one in line");
        drop(got);
        assert!(pool.try_claim_now().is_some(), "with no one in line, a call takes a free slot at once");
    }
}
