//! A simulated network in virtual time, for testing the sans-I/O protocol engines (lowlat's own
//! and ONC RPC's) as quinn tests its connections: messages are lost, duplicated and delayed by
//! independent random amounts (so they overtake one another), all from a seed, and a test jumps
//! its clock to the next delivery instead of sleeping.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What the network does to each message.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message arrives twice.
    pub dup: f64,
    /// Every copy takes this long, plus up to `jitter_us` more.
    pub base_delay_us: u64,
    /// The most extra delay a copy takes, drawn uniformly from `0..=jitter_us` for each copy
    /// (copies overtake one another when it exceeds their spacing).
    pub jitter_us: u64,
}

/// A message in flight: (delivery time, sequence, destination, bytes).
type InFlight<D> = (Instant, u64, D, Vec<u8>);

/// Messages in flight to destinations of type `D`, delivered earliest first.
pub struct SimNet<D: Ord> {
    rng: StdRng,
    faults: Faults,
    queue: BinaryHeap<Reverse<InFlight<D>>>,
    seq: u64,
}

impl<D: Ord> SimNet<D> {
    /// An empty network whose faults are drawn from `seed`: the same seed and the same sends give
    /// the same deliveries.
    pub fn new(seed: u64, faults: Faults) -> SimNet<D> {
        SimNet { rng: StdRng::seed_from_u64(seed), faults, queue: BinaryHeap::new(), seq: 0 }
    }

    /// Sends `head` then `body` as one message to `dest` at `now`.
    pub fn send(&mut self, now: Instant, dest: D, head: &[u8], body: &[u8])
    where
        D: Copy,
    {
        if self.rng.gen_bool(self.faults.loss) {
            return;
        }
        let copies = if self.rng.gen_bool(self.faults.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let delay = self.faults.base_delay_us + self.rng.gen_range(0..=self.faults.jitter_us);
            self.seq += 1;
            self.queue.push(Reverse((now + Duration::from_micros(delay), self.seq, dest, [head, body].concat())));
        }
    }

    /// When the next message arrives.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse(m)| m.0)
    }

    /// The next message to arrive: (arrival time, destination, bytes).
    pub fn pop(&mut self) -> Option<(Instant, D, Vec<u8>)> {
        self.queue.pop().map(|Reverse((at, _, dest, msg))| (at, dest, msg))
    }

    /// The next message that has arrived by `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(D, Vec<u8>)> {
        if self.next_delivery()? > now {
            return None;
        }
        self.pop().map(|(_, dest, msg)| (dest, msg))
    }

    /// No message is in flight.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// At most once, as the callers saw it and as the server did: every call whose result was
/// delivered was delivered once and executed once, and no call was executed twice.
pub fn assert_at_most_once(delivered: &HashMap<u64, u32>, executions: &HashMap<u64, u32>) {
    for (id, n) in delivered {
        assert_eq!(*n, 1, "call {id} delivered {n} times");
        assert_eq!(executions.get(id), Some(&1), "call {id} delivered but executed {:?} times", executions.get(id));
    }
    for (id, n) in executions {
        assert!(*n <= 1, "call {id} executed {n} times");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_network_delivers_in_order_and_a_faulty_one_loses_duplicates_and_reorders() {
        let t0 = Instant::now();
        let clean = Faults { loss: 0.0, dup: 0.0, base_delay_us: 10, jitter_us: 0 };
        let mut net = SimNet::new(1, clean);
        for i in 0..10u8 {
            net.send(t0, 0u8, &[i], b"");
        }
        assert_eq!(net.pop_due(t0), None, "nothing arrives before its delay");
        let got: Vec<u8> = std::iter::from_fn(|| net.pop())
            .map(|(at, _, m)| {
                assert_eq!(at, t0 + Duration::from_micros(10));
                m[0]
            })
            .collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        let faulty = Faults { loss: 0.2, dup: 0.2, base_delay_us: 10, jitter_us: 100 };
        let mut net = SimNet::new(2, faulty);
        for i in 0..1000u16 {
            net.send(t0, 0u8, &i.to_le_bytes(), b"");
        }
        let got: Vec<u16> =
            std::iter::from_fn(|| net.pop()).map(|(_, _, m)| u16::from_le_bytes([m[0], m[1]])).collect();
        let distinct: std::collections::HashSet<_> = got.iter().collect();
        assert!(distinct.len() < 900 && got.len() > distinct.len(), "lost and duplicated");
        assert!(got.windows(2).any(|w| w[0] > w[1]), "reordered");
    }
}
