//! Retransmission timeout from the measured round-trip time: smoothed mean and variance as in
//! RFC 6298, with a floor and a ceiling, and exponential back-off applied by the caller.

use core::time::Duration;

/// One path's round-trip estimate and the retransmission timeout it gives.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    initial: Duration,
    floor: Duration,
    ceiling: Duration,
}

impl RttEstimator {
    /// No sample yet: the timeout is `initial` until the first, then kept within
    /// `floor..=ceiling`.
    pub fn new(initial: Duration, floor: Duration, ceiling: Duration) -> Self {
        RttEstimator { srtt: None, rttvar: Duration::ZERO, initial, floor, ceiling }
    }

    /// Records one round trip (only of calls sent once: Karn's rule is the caller's job).
    pub fn sample(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(rtt);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(s * 7 / 8 + rtt / 8);
            }
        }
    }

    /// The smoothed round trip, if any has been measured.
    pub fn smoothed(&self) -> Option<Duration> {
        self.srtt
    }

    /// The timeout for the first transmission.
    pub fn rto(&self) -> Duration {
        match self.srtt {
            None => self.initial,
            Some(s) => (s + self.rttvar * 4).clamp(self.floor, self.ceiling),
        }
    }

    /// The timeout after `retries` retransmissions (doubling each time, up to the ceiling).
    pub fn backed_off(&self, retries: u32) -> Duration {
        let base = self.rto();
        base.saturating_mul(1u32 << retries.min(16)).min(self.ceiling.max(base))
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
}
