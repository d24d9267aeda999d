//! When an async call that looked for its reply and found none polls again soon and when it
//! parks in the reactor: both protocols' async calls, one rule.
//!
//! A future that spins inside `poll()` holds its executor's thread: tasks on one executor then
//! never overlap their calls (each finds its reply within its own spin and sends the next), and
//! one task may run thousands of calls while the others' replies wait. So an async call looks
//! once per poll, and when it finds nothing it either asks to be polled again (waking itself,
//! so its executor runs the other tasks first and comes back: the spin goes round the
//! executor, which finds every completed call in one pass over its tasks, on its own thread) or
//! parks in the reactor (a thread hop, 50-100 µs to wake on a VM).
//!
//! It keeps polling while the binding's spin budget has not run out since *progress*: the later
//! of the moment this call began to wait and the moment any async call of the same client last
//! finished. With many calls in flight a single call may wait long (behind the 63 others) while
//! replies arrive every microsecond; measured from its own send it would exhaust its budget and
//! park, and every call would then pay the reactor's hop (and, parked while the others run,
//! come back thousands of calls later). Under the adaptive policy the budget is its cap
//! ([`ADAPTIVE_CAP`], 100 µs without progress), not what blocking calls learn from whole calls:
//! a pipelined call's whole wait says nothing of whether polling is wasted, and learnt from it
//! (a tail of slow calls pushing the mean past the cap) a slot's calls parked at once, came back
//! milliseconds later, and kept the mean there: one task ran 4,692 calls in a row while others
//! waited (64 tasks over shared memory). Polling while others progress costs nothing the
//! executor's thread would not spend anyway; with nothing progressing, it is bounded by the cap.
//!
//! An async call that finds every slot busy parks at once ([`claim_or_park`]): a release wakes
//! it, never a timer alone.

use std::task::Waker;
use std::time::Instant;

use lowlat_wait::{SpinPolicy, Spinner, ADAPTIVE_CAP};

use super::pool::{Claimed, InLine, SlotPool};
use crate::reactor::{self, Parking};
use crate::Error;

/// What an async call that needs a slot got from one poll ([`claim_or_park`]).
pub(crate) enum SlotWait<'p, S> {
    /// A slot, the call's now.
    Claimed(Claimed<'p, S>),
    /// In line for a release and parked in the reactor until one wakes it or the deadline.
    Parked(Parking),
    /// The deadline passed with every slot busy.
    TimedOut,
}

/// A slot of `slots` for an async call, or the call in line and parked until a release wakes
/// it, `deadline` comes, or (where a release may go unseen) it should look again. `line` is
/// the call's place in line, kept by the call.
pub(crate) fn claim_or_park<'p, S>(
    slots: &'p SlotPool<S>,
    waker: &Waker,
    line: &mut InLine,
    deadline: Instant,
) -> Result<SlotWait<'p, S>, Error> {
    let (claimed, recheck) = slots.poll_claim(waker, line);
    if let Some(g) = claimed {
        return Ok(SlotWait::Claimed(g));
    }
    let now = Instant::now();
    if now >= deadline {
        return Ok(SlotWait::TimedOut);
    }
    let at = recheck.map_or(deadline, |r| deadline.min(now + r));
    reactor::park(&[], Some(at), waker).map(SlotWait::Parked).map_err(|e| Error::io("park an async call", e))
}

/// A call that keeps polling reads the clock once in this many polls (and at each moment of
/// progress); between, it may run up to this many polls past its budget (well under a
/// microsecond each over shared memory, against a budget of 5 µs or more).
pub(crate) const POLLS_PER_CLOCK: u32 = 16;

/// One async call's view of its client's progress.
#[derive(Default)]
pub(crate) struct Pacing {
    /// The client's `returned` count when last looked at.
    seen: u64,
    /// Since when nothing of the client has finished, as far as this call knows (`None`: not
    /// timed since the last progress).
    since: Option<Instant>,
    /// Polls since the last progress.
    polls: u32,
    /// The budget ran out with no progress since: the call parks at each look that finds
    /// nothing until another call finishes.
    spent: bool,
}

impl Pacing {
    /// Whether a call that found nothing polls again soon (true) or parks (false), under
    /// `spinner`'s budget; `returned`: the client's [`SlotPool::returned`](super::pool::SlotPool::returned).
    #[inline]
    pub fn keep_polling(&mut self, returned: u64, spinner: &Spinner) -> bool {
        let budget = match spinner.policy() {
            SpinPolicy::Adaptive => Some(ADAPTIVE_CAP),
            _ => spinner.budget(),
        };
        let Some(budget) = budget else { return true };
        if budget.is_zero() {
            return false;
        }
        if returned != self.seen {
            self.seen = returned;
            self.since = None;
            self.polls = 0;
            self.spent = false;
        }
        // Once spent, it stays spent until progress: a call that asks again at once (its
        // whole wait after a bare look) would otherwise be told to poll on, and never park,
        // never look whether its peer is gone, and spin to its deadline.
        if self.spent {
            return false;
        }
        self.polls = self.polls.wrapping_add(1);
        if self.since.is_some() && !self.polls.is_multiple_of(POLLS_PER_CLOCK) {
            return true;
        }
        let now = Instant::now();
        self.spent = now.saturating_duration_since(*self.since.get_or_insert(now)) >= budget;
        !self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_call_keeps_polling_within_its_budget_since_progress_and_parks_after() {
        let budget = Spinner::new(SpinPolicy::Budget(Duration::from_millis(20)));
        let mut p = Pacing::default();
        assert!(p.keep_polling(0, &budget), "within the budget");
        std::thread::sleep(Duration::from_millis(25));
        let polls = (0..POLLS_PER_CLOCK).take_while(|_| p.keep_polling(0, &budget)).count();
        assert!(polls < POLLS_PER_CLOCK as usize, "nothing finished for longer than the budget, yet it polled on");
        // Spent, it stays spent: asked again at once (as a call does after a bare look), it
        // still parks.
        assert!(!p.keep_polling(0, &budget), "a spent budget said to poll on");
        // Another call of the client finished: the budget runs from now.
        assert!(p.keep_polling(1, &budget), "progress restarts the budget");

        let mut p = Pacing::default();
        assert!(!p.keep_polling(0, &Spinner::new(SpinPolicy::Block)), "no budget: parks at once");
        assert!(p.keep_polling(0, &Spinner::new(SpinPolicy::Forever)), "forever: never parks");
    }
}
