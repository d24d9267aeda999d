//! Retransmission timeout from the measured round-trip time: smoothed mean and variance as in
//! RFC 6298, with a floor and a ceiling, and exponential back-off applied by the caller.

use core::time::Duration;

/// One path's round-trip estimate and the retransmission timeout it gives.
///
/// Kept in whole nanoseconds: the estimate is updated and read on every call over a datagram
/// transport, and `Duration`'s arithmetic (seconds and nanoseconds apart, checked) took ~140
/// instructions of the call's ~1,500 there; shifts on one integer take a dozen.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    /// The smoothed round trip in nanoseconds; 0 before the first sample (a sample is at least
    /// 1 ns).
    srtt_ns: u64,
    rttvar_ns: u64,
    initial: Duration,
    floor_ns: u64,
    ceiling_ns: u64,
}

/// Nanoseconds of `d`, saturating (584 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    /// No sample yet: the timeout is `initial` until the first, then kept within
    /// `floor..=ceiling`.
    pub fn new(initial: Duration, floor: Duration, ceiling: Duration) -> Self {
        let ceiling_ns = nanos(ceiling);
        RttEstimator { srtt_ns: 0, rttvar_ns: 0, initial, floor_ns: nanos(floor).min(ceiling_ns), ceiling_ns }
    }

    /// Records one round trip (only of calls sent once: Karn's rule is the caller's job).
    #[inline]
    pub fn sample(&mut self, rtt: Duration) {
        // Bounded so that the sums below cannot overflow (no timeout is ever that long).
        let rtt = nanos(rtt).clamp(1, u64::MAX >> 4);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt;
            self.rttvar_ns = rtt / 2;
        } else {
            let diff = self.srtt_ns.abs_diff(rtt);
            self.rttvar_ns = self.rttvar_ns - self.rttvar_ns / 4 + diff / 4;
            self.srtt_ns = self.srtt_ns - self.srtt_ns / 8 + rtt / 8;
        }
    }

    /// The smoothed round trip, if any has been measured.
    pub fn smoothed(&self) -> Option<Duration> {
        (self.srtt_ns != 0).then(|| Duration::from_nanos(self.srtt_ns))
    }

    /// The timeout for the first transmission.
    #[inline]
    pub fn rto(&self) -> Duration {
        if self.srtt_ns == 0 {
            return self.initial;
        }
        Duration::from_nanos((self.srtt_ns + 4 * self.rttvar_ns).clamp(self.floor_ns, self.ceiling_ns))
    }

    /// The timeout after `retries` retransmissions (doubling each time, up to the ceiling).
    pub fn backed_off(&self, retries: u32) -> Duration {
        let base = self.rto();
        base.saturating_mul(1u32 << retries.min(16)).min(Duration::from_nanos(self.ceiling_ns).max(base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_tracks_samples_with_floor_and_backoff() {
        let mut r = RttEstimator::new(Duration::from_millis(10), Duration::from_millis(1), Duration::from_secs(1));
        assert_eq!(r.rto(), Duration::from_millis(10));
        for _ in 0..50 {
            r.sample(Duration::from_micros(10));
        }
        // 10 µs round trips: the floor holds the timeout at 1 ms.
        assert_eq!(r.rto(), Duration::from_millis(1));
        for _ in 0..50 {
            r.sample(Duration::from_millis(20));
        }
        assert!(r.rto() >= Duration::from_millis(20) && r.rto() < Duration::from_millis(40), "{:?}", r.rto());
        assert_eq!(r.backed_off(1), r.rto() * 2);
        assert_eq!(r.backed_off(30), Duration::from_secs(1));
    }

    #[test]
    fn the_estimate_follows_rfc_6298() {
        let mut r = RttEstimator::new(Duration::from_secs(1), Duration::ZERO, Duration::from_secs(60));
        assert_eq!(r.smoothed(), None);
        // First sample R: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR = 3R.
        r.sample(Duration::from_micros(80));
        assert_eq!(r.smoothed(), Some(Duration::from_micros(80)));
        assert_eq!(r.rto(), Duration::from_micros(240));
        // Then RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R'|, SRTT = 7/8 SRTT + 1/8 R'.
        r.sample(Duration::from_micros(160));
        assert_eq!(r.smoothed(), Some(Duration::from_micros(90)));
        assert_eq!(r.rto(), Duration::from_micros(90 + 4 * 50));
        // A round trip longer than any timeout neither overflows nor passes the ceiling.
        r.sample(Duration::MAX);
        assert_eq!(r.rto(), Duration::from_secs(60));
    }
}
