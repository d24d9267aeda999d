//! How long served calls take, per procedure, measured by the serving thread from the moment it
//! takes a call to the moment the call's answer goes out (for a call on the worker pool or an
//! async procedure: until its result comes back to be sent).
//!
//! Only a sample of the calls is timed, one in [`SAMPLE_EVERY`], so that timing costs the call
//! path a decrement and a branch (a clock read costs ~25 ns in a VM: two per call would be a
//! tenth of a shared-memory null call). Each procedure's durations fall into quarter-octave
//! buckets from 128 ns to 17 s (upper bounds 1.25, 1.5, 1.75 and 2 times each power of two),
//! read as a Prometheus histogram (`crate::metrics`): a quantile read from them is within 12% of
//! the true one. Plain numbers on the serving thread's own memory, published only when asked,
//! as the counters are (`crate::stats`).

/// How many bounded buckets a procedure's times have (and one more, unbounded): four to an
/// octave from 2^7 ns to 2^34 ns.
pub const BUCKETS: usize = 108;

/// One call in this many is timed.
pub(crate) const SAMPLE_EVERY: u32 = 64;

/// The sampled durations of one procedure's calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcedureTimes {
    /// Calls timed.
    pub count: u64,
    /// Their durations added up, in nanoseconds.
    pub sum_ns: u64,
    /// Calls timed per bucket (not cumulative), by [`bucket_of`]; the last is everything longer
    /// than the last bound.
    pub buckets: Vec<u64>,
}

impl Default for ProcedureTimes {
    fn default() -> ProcedureTimes {
        ProcedureTimes { count: 0, sum_ns: 0, buckets: vec![0; BUCKETS + 1] }
    }
}

impl ProcedureTimes {
    fn record(&mut self, ns: u64) {
        self.count += 1;
        self.sum_ns += ns;
        self.buckets[bucket_of(ns)] += 1;
    }
}

/// Lowest power of two of the buckets: 2^7 ns = 128 ns.
pub(crate) const LOW_EXP: u32 = 7;

/// The bucket of a duration of `ns` nanoseconds: four to an octave, from the power of two and
/// the two bits below it, so no float and no search.
#[inline]
pub fn bucket_of(ns: u64) -> usize {
    if ns < (1 << LOW_EXP) {
        return 0;
    }
    let exp = 63 - ns.leading_zeros();
    let quarter = ((ns >> (exp - 2)) & 3) as usize;
    ((exp - LOW_EXP) as usize * 4 + quarter).min(BUCKETS)
}

/// The upper bound of bucket `i`, in nanoseconds (`None` for the last, unbounded one).
pub fn bucket_bound_ns(i: usize) -> Option<u64> {
    (i < BUCKETS).then(|| {
        let exp = LOW_EXP + (i / 4) as u32;
        (1u64 << exp) / 4 * (5 + (i % 4) as u64)
    })
}

/// The durations of one serving thread's calls, per procedure (by `Procedure::id`).
pub(crate) struct CallTimes {
    countdown: u32,
    per_procedure: Vec<ProcedureTimes>,
}

impl CallTimes {
    /// For procedures numbered below `procedures` (more grow the table when first timed).
    pub fn new(procedures: usize) -> CallTimes {
        CallTimes { countdown: SAMPLE_EVERY, per_procedure: vec![ProcedureTimes::default(); procedures] }
    }

    /// Whether the call just taken is to be timed.
    #[inline(always)]
    pub fn sample(&mut self) -> bool {
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = SAMPLE_EVERY;
            true
        } else {
            false
        }
    }

    /// Records a timed call of procedure `id` that began at `started` (ns on the monotonic
    /// clock).
    #[cold]
    pub fn record(&mut self, id: usize, started: u64) {
        let ns = crate::trace::now_ns().saturating_sub(started);
        if id >= self.per_procedure.len() {
            self.per_procedure.resize(id + 1, ProcedureTimes::default());
        }
        self.per_procedure[id].record(ns);
    }

    /// Every procedure's times, by id.
    pub fn snapshot(&self) -> &[ProcedureTimes] {
        &self.per_procedure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_in_quarter_octave_buckets_whose_bounds_hold_them() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(127), 0);
        assert_eq!(bucket_bound_ns(0), Some(160));
        for ns in [128u64, 159, 160, 161, 200, 255, 256, 1_000, 123_456, 999_999_999, 16_000_000_000] {
            let b = bucket_of(ns);
            let upper = bucket_bound_ns(b).expect("within the buckets");
            let lower = if b == 0 { 0 } else { bucket_bound_ns(b - 1).unwrap() };
            assert!(lower <= ns && ns <= upper, "{ns} ns in bucket {b} ({lower}, {upper}]");
            // A quarter of an octave: the bucket's width is at most a quarter of its lower bound.
            assert!(b == 0 || (upper - lower) * 4 <= lower + 3, "{lower}..{upper}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS, "beyond the last bound: the unbounded bucket");
        assert_eq!(bucket_bound_ns(BUCKETS), None);
        // Bounds rise strictly.
        let bounds: Vec<u64> = (0..BUCKETS).map(|i| bucket_bound_ns(i).unwrap()).collect();
        assert!(bounds.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn one_call_in_sample_every_is_timed() {
        let mut t = CallTimes::new(2);
        let timed = (0..SAMPLE_EVERY * 10).filter(|_| t.sample()).count();
        assert_eq!(timed, 10);
        t.record(1, crate::trace::now_ns());
        t.record(5, 0);
        assert_eq!(t.snapshot().len(), 6, "a procedure beyond the table grows it");
        assert_eq!(t.snapshot()[1].count, 1);
        assert_eq!(t.snapshot()[5].buckets.iter().sum::<u64>(), 1);
    }
}
