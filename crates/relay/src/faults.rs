//! What the relay does to each datagram, decided from a seeded random stream: no sockets, no
//! clock (time comes in as `now`), so a run with the same seed and the same arrivals does the
//! same things, and the decisions are tested in virtual time.
//!
//! A datagram that arrives is, in this order: dropped (probability `drop`); otherwise corrupted
//! (one bit flipped, `corrupt`); delayed by a draw from `delay`; held back to go after the next
//! datagram of its direction (`reorder`; released anyway after [`REORDER_HOLD`]); and sent twice
//! (`dup`, the copy independently delayed). Delayed datagrams are bounded by [`MAX_HELD`]: beyond
//! it a datagram goes at once, undelayed (counted as `overflow`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A datagram held back for reordering goes at the latest this long after it arrived, if no
/// later one of its direction has come to overtake it.
pub const REORDER_HOLD: Duration = Duration::from_millis(10);
/// Datagrams held (delayed or reordered) per direction at most.
pub const MAX_HELD: usize = 16_384;

/// A probability, from a decimal fraction (`0.05`) or a percentage (`5%`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Probability(f64);

impl Probability {
    /// Zero: the fault never happens.
    pub const NEVER: Probability = Probability(0.0);

    /// `p` as a probability; an error unless `0.0 <= p <= 1.0` (a NaN included).
    pub fn new(p: f64) -> Result<Probability, ParseError> {
        if (0.0..=1.0).contains(&p) {
            Ok(Probability(p))
        } else {
            Err(ParseError(format!("probability {p} is not between 0 and 1")))
        }
    }

    /// The probability, from 0.0 to 1.0.
    pub fn value(self) -> f64 {
        self.0
    }
}

impl FromStr for Probability {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError(format!("{s:?} is not a probability (e.g. 0.05 or 5%)"));
        match s.strip_suffix('%') {
            Some(pct) => Probability::new(pct.trim().parse::<f64>().map_err(|_| bad())? / 100.0),
            None => Probability::new(s.trim().parse::<f64>().map_err(|_| bad())?),
        }
    }
}

impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

/// How long a datagram is delayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delay {
    /// Passed on at once.
    #[default]
    None,
    /// Always this long.
    Fixed(Duration),
    /// Uniformly between the two.
    Uniform(Duration, Duration),
    /// Exponentially distributed with this mean (capped at ten times the mean).
    Exponential(Duration),
}

/// Parses `100us`, `2ms`, `1.5s`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let s = s.trim();
    let bad = || ParseError(format!("{s:?} is not a duration (e.g. 200us, 2ms, 1s)"));
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().map_err(|_| bad())?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(n * scale).map_err(|_| bad())
}

impl FromStr for Delay {
    type Err = ParseError;
    /// `0`, `200us` (fixed), `100us-2ms` (uniform), `exp:300us` (exponential with that mean).
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if let Some(mean) = s.strip_prefix("exp:") {
            return Ok(Delay::Exponential(parse_duration(mean)?));
        }
        if let Some((lo, hi)) = s.split_once('-') {
            let (lo, hi) = (parse_duration(lo)?, parse_duration(hi)?);
            if lo > hi {
                return Err(ParseError(format!("{s:?}: the lower bound is above the upper one")));
            }
            return Ok(Delay::Uniform(lo, hi));
        }
        let d = parse_duration(s)?;
        Ok(if d.is_zero() { Delay::None } else { Delay::Fixed(d) })
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delay::None => write!(f, "none"),
            Delay::Fixed(d) => write!(f, "{d:?}"),
            Delay::Uniform(a, b) => write!(f, "uniform {a:?}-{b:?}"),
            Delay::Exponential(m) => write!(f, "exponential, mean {m:?}"),
        }
    }
}

/// A malformed fault specification.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// The faults to inject, the same in both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    /// Chance that a datagram is dropped.
    pub drop: Probability,
    /// Chance that a datagram is sent twice (the copy with a delay of its own).
    pub dup: Probability,
    /// Chance that a datagram is held until the next one of its direction has overtaken it (or
    /// [`REORDER_HOLD`] has passed).
    pub reorder: Probability,
    /// Chance that one bit of a datagram is flipped (empty datagrams never are).
    pub corrupt: Probability,
    /// How long each datagram (and each copy) is held before it goes on.
    pub delay: Delay,
    /// Seeds the random draws: the same seed and the same arrivals give the same faults.
    pub seed: u64,
}

/// What happened to the datagrams of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams that arrived.
    pub received: u64,
    /// Datagrams sent on, copies included.
    pub sent: u64,
    /// Datagrams dropped.
    pub dropped: u64,
    /// Datagrams sent twice.
    pub duplicated: u64,
    /// Datagrams held back to be overtaken.
    pub reordered: u64,
    /// Datagrams (and copies) held for a delay.
    pub delayed: u64,
    /// Datagrams with one bit flipped.
    pub corrupted: u64,
    /// Sent at once, unharmed, because too many were held already.
    pub overflow: u64,
    /// Bytes that arrived (datagram payloads only).
    pub bytes_in: u64,
}

/// One direction's fault injector. `P` is what the caller needs to send a datagram on (its
/// destination).
pub struct Injector<P> {
    faults: Faults,
    rng: StdRng,
    /// Held datagrams by release time; the sequence number keeps equal times in arrival order.
    held: BinaryHeap<Reverse<(Instant, u64, Held<P>)>>,
    seq: u64,
    /// A datagram waiting for the next one of its direction to overtake it, and when it goes
    /// anyway.
    reorder_waiting: Option<(Instant, Held<P>)>,
    /// What this direction did so far.
    pub stats: Stats,
}

struct Held<P> {
    data: Vec<u8>,
    to: P,
}

// Ordered by (time, sequence) alone, which are unique.
impl<P> PartialEq for Held<P> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<P> Eq for Held<P> {}
impl<P> PartialOrd for Held<P> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for Held<P> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<P: Clone> Injector<P> {
    /// `direction` tells the two directions' random streams apart under one seed.
    pub fn new(faults: Faults, direction: u64) -> Injector<P> {
        let seed = faults.seed ^ direction.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Injector {
            faults,
            rng: StdRng::seed_from_u64(seed),
            held: BinaryHeap::new(),
            seq: 0,
            reorder_waiting: None,
            stats: Stats::default(),
        }
    }

    fn chance(&mut self, p: Probability) -> bool {
        p.0 > 0.0 && self.rng.gen_bool(p.0)
    }

    fn draw_delay(&mut self) -> Duration {
        match self.faults.delay {
            Delay::None => Duration::ZERO,
            Delay::Fixed(d) => d,
            Delay::Uniform(a, b) => {
                if a == b {
                    a
                } else {
                    Duration::from_nanos(self.rng.gen_range(a.as_nanos() as u64..=b.as_nanos() as u64))
                }
            }
            Delay::Exponential(m) => {
                let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
                (m.mul_f64(-u.ln())).min(m * 10)
            }
        }
    }

    /// Takes a datagram for `to` that arrived at `now`: what is to be sent at once goes to
    /// `send`, the rest is held until [`poll_timeout`](Self::poll_timeout).
    pub fn arrive(&mut self, mut data: Vec<u8>, to: P, now: Instant, send: &mut impl FnMut(&[u8], &P)) {
        self.stats.received += 1;
        self.stats.bytes_in += data.len() as u64;
        if self.chance(self.faults.drop) {
            self.stats.dropped += 1;
            return;
        }
        if !data.is_empty() && self.chance(self.faults.corrupt) {
            let at = self.rng.gen_range(0..data.len());
            data[at] ^= 1 << self.rng.gen_range(0..8);
            self.stats.corrupted += 1;
        }
        // This one overtakes the one waiting to be reordered, which goes right after it.
        let overtaken = self.reorder_waiting.take();
        let copy = self.chance(self.faults.dup).then(|| data.clone());
        let reorder = overtaken.is_none() && self.chance(self.faults.reorder);
        let delay = self.draw_delay();
        if reorder {
            self.stats.reordered += 1;
            self.reorder_waiting = Some((now + delay.max(REORDER_HOLD), Held { data, to: to.clone() }));
        } else {
            self.pass(data, to.clone(), now, delay, send);
        }
        if let Some((_, h)) = overtaken {
            // Right after the overtaker: at once if it went at once, else just behind it.
            self.pass(h.data, h.to, now, delay, send);
        }
        if let Some(copy) = copy {
            self.stats.duplicated += 1;
            let delay = self.draw_delay();
            self.pass(copy, to, now, delay, send);
        }
    }

    fn pass(&mut self, data: Vec<u8>, to: P, now: Instant, delay: Duration, send: &mut impl FnMut(&[u8], &P)) {
        if delay.is_zero() {
            self.stats.sent += 1;
            send(&data, &to);
        } else if self.held.len() >= MAX_HELD {
            self.stats.overflow += 1;
            self.stats.sent += 1;
            send(&data, &to);
        } else {
            self.stats.delayed += 1;
            self.seq += 1;
            self.held.push(Reverse((now + delay, self.seq, Held { data, to })));
        }
    }

    /// When the next held datagram is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let delayed = self.held.peek().map(|Reverse((at, _, _))| *at);
        let waiting = self.reorder_waiting.as_ref().map(|(at, _)| *at);
        match (delayed, waiting) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sends every held datagram due by `now`.
    pub fn handle_timeout(&mut self, now: Instant, send: &mut impl FnMut(&[u8], &P)) {
        while self.held.peek().is_some_and(|Reverse((at, _, _))| *at <= now) {
            let Some(Reverse((_, _, h))) = self.held.pop() else { break };
            self.stats.sent += 1;
            send(&h.data, &h.to);
        }
        if self.reorder_waiting.as_ref().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, h)) = self.reorder_waiting.take() {
                self.stats.sent += 1;
                send(&h.data, &h.to);
            }
        }
    }

    /// Datagrams still held.
    pub fn held(&self) -> usize {
        self.held.len() + self.reorder_waiting.is_some() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(faults: Faults, n: u32) -> (Vec<Vec<u8>>, Stats) {
        let mut inj: Injector<()> = Injector::new(faults, 0);
        let mut out = Vec::new();
        let mut now = Instant::now();
        for i in 0..n {
            inj.arrive(i.to_be_bytes().to_vec(), (), now, &mut |d, _| out.push(d.to_vec()));
            now += Duration::from_micros(100);
            inj.handle_timeout(now, &mut |d, _| out.push(d.to_vec()));
        }
        now += Duration::from_secs(1);
        inj.handle_timeout(now, &mut |d, _| out.push(d.to_vec()));
        assert_eq!(inj.held(), 0);
        (out, inj.stats)
    }

    #[test]
    fn specifications_parse_and_say_what_is_wrong() {
        assert_eq!("5%".parse::<Probability>().unwrap(), Probability(0.05));
        assert_eq!("0.25".parse::<Probability>().unwrap(), Probability(0.25));
        assert!("1.5".parse::<Probability>().unwrap_err().0.contains("between 0 and 1"));
        assert!("lots".parse::<Probability>().is_err());
        assert_eq!("200us".parse::<Delay>().unwrap(), Delay::Fixed(Duration::from_micros(200)));
        assert_eq!("0".parse::<Delay>().unwrap(), Delay::None);
        assert_eq!(
            "100us-2ms".parse::<Delay>().unwrap(),
            Delay::Uniform(Duration::from_micros(100), Duration::from_millis(2))
        );
        assert_eq!("exp:1.5ms".parse::<Delay>().unwrap(), Delay::Exponential(Duration::from_micros(1500)));
        assert!("2ms-1ms".parse::<Delay>().unwrap_err().0.contains("lower bound"));
        assert!("3 parsecs".parse::<Delay>().is_err());
    }

    #[test]
    fn without_faults_everything_passes_in_order() {
        let (out, s) = run(Faults::default(), 1000);
        assert_eq!(out, (0..1000u32).map(|i| i.to_be_bytes().to_vec()).collect::<Vec<_>>());
        assert_eq!((s.received, s.sent, s.dropped), (1000, 1000, 0));
    }

    #[test]
    fn each_fault_happens_at_about_its_rate_and_the_books_balance() {
        let p = |x| Probability::new(x).unwrap();
        let faults = Faults {
            drop: p(0.05),
            dup: p(0.05),
            reorder: p(0.05),
            corrupt: p(0.01),
            delay: Delay::Uniform(Duration::ZERO, Duration::from_micros(300)),
            seed: 7,
        };
        let n = 100_000;
        let (out, s) = run(faults, n);
        let near = |got: u64, rate: f64| (got as f64 - n as f64 * rate).abs() < n as f64 * rate * 0.15;
        assert!(near(s.dropped, 0.05), "{s:?}");
        assert!(near(s.duplicated, 0.05 * 0.95), "{s:?}");
        assert!(near(s.reordered, 0.05 * 0.95 * 0.95), "{s:?}");
        assert!(near(s.corrupted, 0.01 * 0.95), "{s:?}");
        assert_eq!(s.sent, s.received - s.dropped + s.duplicated, "{s:?}");
        assert_eq!(out.len() as u64, s.sent);
        // Reordering happened: some datagram came out before one that arrived earlier.
        let seqs: Vec<u32> = out.iter().map(|d| u32::from_be_bytes(d[..4].try_into().unwrap())).collect();
        assert!(seqs.windows(2).any(|w| w[0] > w[1]));
        // The same seed does the same things.
        assert_eq!(run(faults, n).0, out);
        assert_ne!(run(Faults { seed: 8, ..faults }, n).0, out);
    }

    #[test]
    fn a_reordered_datagram_goes_right_after_the_next_one_or_after_the_hold() {
        let faults = Faults { reorder: Probability::new(1.0).unwrap(), ..Faults::default() };
        let mut inj: Injector<()> = Injector::new(faults, 0);
        let mut out: Vec<u8> = Vec::new();
        let t0 = Instant::now();
        inj.arrive(vec![1], (), t0, &mut |d, _| out.push(d[0]));
        assert!(out.is_empty(), "held back");
        // The next one overtakes it (and is not itself held), then the first follows.
        inj.arrive(vec![2], (), t0, &mut |d, _| out.push(d[0]));
        assert_eq!(out, [2, 1]);
        inj.arrive(vec![3], (), t0, &mut |d, _| out.push(d[0]));
        assert_eq!(inj.poll_timeout(), Some(t0 + REORDER_HOLD));
        inj.handle_timeout(t0 + REORDER_HOLD, &mut |d, _| out.push(d[0]));
        assert_eq!(out, [2, 1, 3], "nothing came to overtake it: it went after the hold");
    }

    #[test]
    fn held_datagrams_are_bounded() {
        let faults = Faults { delay: Delay::Fixed(Duration::from_secs(10)), ..Faults::default() };
        let mut inj: Injector<()> = Injector::new(faults, 0);
        let mut sent = 0;
        let now = Instant::now();
        for _ in 0..MAX_HELD + 10 {
            inj.arrive(vec![0; 8], (), now, &mut |_, _| sent += 1);
        }
        assert_eq!((inj.held(), sent, inj.stats.overflow), (MAX_HELD, 10, 10));
        assert_eq!(inj.stats.delayed, MAX_HELD as u64);
    }
}
