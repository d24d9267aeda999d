//! How long served calls take, per procedure, measured by the serving thread from the moment it
//! takes a call to the moment the call's answer goes out (for a call on the worker pool or an
//! async procedure: until its result comes back to be sent).
//!
//! Only a sample of the calls is timed, one in [`SAMPLE_EVERY`], so that timing costs the call
//! path a decrement and a branch (a clock read costs ~25 ns in a VM: two per call would be a
//! tenth of a shared-memory null call). Each procedure's durations fall into buckets an eighth
//! of an octave wide from 128 ns to 17 s (upper bounds 1.125, 1.25, ... 2 times each power of
//! two), read as a Prometheus histogram (`crate::metrics`): a quantile read from them is within
//! 6% of the true one. Plain numbers on the serving thread's own memory, published only when asked,
//! as the counters are (`crate::stats`).

/// How many bounded buckets a procedure's times have (and one more, unbounded): eight to an
/// octave from 2^7 ns to 2^34 ns.
pub const BUCKETS: usize = 216;

/// Buckets to an octave, as a power of two.
const PER_OCTAVE_BITS: u32 = 3;

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

impl ProcedureTimes {
    /// Adds `other`'s calls (another serving thread's, of the same procedure).
    pub fn add(&mut self, other: &ProcedureTimes) {
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
    }
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

/// The bucket of a duration of `ns` nanoseconds: eight to an octave, from the power of two and
/// the three bits below it, so no float and no search.
#[inline]
pub fn bucket_of(ns: u64) -> usize {
    if ns < (1 << LOW_EXP) {
        return 0;
    }
    let exp = 63 - ns.leading_zeros();
    let per = 1usize << PER_OCTAVE_BITS;
    let part = ((ns >> (exp - PER_OCTAVE_BITS)) as usize) & (per - 1);
    ((exp - LOW_EXP) as usize * per + part).min(BUCKETS)
}

/// The upper bound of bucket `i`, in nanoseconds (`None` for the last, unbounded one).
pub fn bucket_bound_ns(i: usize) -> Option<u64> {
    let per = 1usize << PER_OCTAVE_BITS;
    (i < BUCKETS).then(|| {
        let exp = LOW_EXP + (i / per) as u32;
        (1u64 << exp) / per as u64 * (per + 1 + i % per) as u64
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
    fn durations_fall_in_eighth_octave_buckets_whose_bounds_hold_them() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(127), 0);
        assert_eq!(bucket_bound_ns(0), Some(144));
        for ns in [128u64, 159, 160, 161, 200, 255, 256, 1_000, 123_456, 999_999_999, 16_000_000_000] {
            let b = bucket_of(ns);
            let upper = bucket_bound_ns(b).expect("within the buckets");
            let lower = if b == 0 { 0 } else { bucket_bound_ns(b - 1).unwrap() };
            assert!(lower <= ns && ns <= upper, "{ns} ns in bucket {b} ({lower}, {upper}]");
            // An eighth of an octave: the bucket's width is at most an eighth of its lower bound.
            assert!(b == 0 || (upper - lower) * 8 <= lower + 7, "{lower}..{upper}");
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
