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
//! replies arrive every microsecond; measured from its own send it would exhaust an adaptive
//! budget and park, and every call would then pay the reactor's hop.

use std::time::{Duration, Instant};

use lowlat_wait::Spinner;

/// One async call's view of its client's progress.
#[derive(Default)]
pub(crate) struct Pacing {
    /// The client's `returned` count when last looked at.
    seen: u64,
    /// Since when nothing of the client has finished, as far as this call knows.
    since: Option<Instant>,
}

impl Pacing {
    /// Whether a call that found nothing polls again soon (true) or parks (false), under
    /// `spinner`'s budget; `returned`: the client's [`SlotPool::returned`](super::pool::SlotPool::returned).
    #[inline]
    pub fn keep_polling(&mut self, returned: u64, spinner: &Spinner) -> bool {
        let Some(budget) = spinner.budget() else { return true };
        let now = Instant::now();
        if self.since.is_none() || returned != self.seen {
            self.seen = returned;
            self.since = Some(now);
        }
        now.saturating_duration_since(self.since.unwrap_or(now)) < budget
    }

    /// The call has its reply: teaches an adaptive `spinner` how long it waited since progress
    /// (0 when it never waited).
    #[inline]
    pub fn done(&self, spinner: &mut Spinner) {
        let waited = self.since.map_or(Duration::ZERO, |s| s.elapsed());
        spinner.observe(waited);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowlat_wait::SpinPolicy;

    #[test]
    fn a_call_keeps_polling_within_its_budget_since_progress_and_parks_after() {
        let budget = Spinner::new(SpinPolicy::Budget(Duration::from_millis(20)));
        let mut p = Pacing::default();
        assert!(p.keep_polling(0, &budget), "within the budget");
        std::thread::sleep(Duration::from_millis(25));
        assert!(!p.keep_polling(0, &budget), "nothing finished for longer than the budget");
        // Another call of the client finished: the budget runs from now.
        assert!(p.keep_polling(1, &budget), "progress restarts the budget");

        let mut p = Pacing::default();
        assert!(!p.keep_polling(0, &Spinner::new(SpinPolicy::Block)), "no budget: parks at once");
        assert!(p.keep_polling(0, &Spinner::new(SpinPolicy::Forever)), "forever: never parks");
    }
}
