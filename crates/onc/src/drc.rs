//! The duplicate-request cache of a UDP server: a retransmitted call (same xid, same client
//! address, same bytes) is answered with the reply already sent instead of running again, so a
//! non-idempotent procedure runs once per call however often the network makes the client resend.
//! A cached reply goes only to the address its call came from: the same bytes from another
//! address are another client's call (ONC RPC cannot tell), so a recorded call sent from a
//! victim's address never has a kept reply reflected there.
//!
//! Bounded: the oldest entries are forgotten first, and their reply buffers are reused, so a
//! server in steady state allocates nothing here.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};

/// What the cache knows about a call.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// Never seen (now recorded as in progress): run it.
    New,
    /// Seen and still running (on a worker): drop the retransmission.
    InProgress,
    /// Seen and answered: send this reply again.
    Replay(&'a [u8]),
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    done: bool,
    reply: Vec<u8>,
}

/// How the cache hashes its keys: FxHash's multiply-and-rotate step from a secret start, then a
/// final mix, a few instructions per word where the standard SipHash costs ~200 per key (and a
/// call looks its key up about four times). Keys come from the network, so the start is drawn
/// from the cache's seed: a peer cannot aim its xids at one bucket without knowing it, and the
/// table is small and bounded either way.
#[derive(Clone, Copy, Debug)]
struct KeyHashing {
    start: u64,
}

impl BuildHasher for KeyHashing {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.start)
    }
}

struct KeyHasher(u64);

impl KeyHasher {
    #[inline]
    fn mix(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.mix(u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
        }
        for &b in words.remainder() {
            self.mix(b as u64);
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.mix(v as u64);
    }
    fn write_u16(&mut self, v: u16) {
        self.mix(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.mix(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits weak, and the table indexes by them.
        let z = (self.0 ^ (self.0 >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        z ^ (z >> 32)
    }
}

/// Cache keyed by xid and client address, checked against a hash of the call's bytes (a client
/// reusing an xid for a different call is not mistaken for a retransmission).
#[derive(Debug)]
pub struct DuplicateCache<A: Eq + Hash + Copy> {
    map: HashMap<(u32, A), Entry, KeyHashing>,
    order: VecDeque<(u32, A)>,
    capacity: usize,
    spare: Vec<Vec<u8>>,
}

/// A hash of the call's bytes after the xid, eight bytes at a time (FxHash's mixing step): a
/// byte-at-a-time hash of a 1440-byte call would cost more than a microsecond on every call.
pub fn call_hash(msg: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let body = msg.get(4..).unwrap_or(&[]);
    let mut h = body.len() as u64;
    let mut words = body.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h.rotate_left(5) ^ v).wrapping_mul(K);
    }
    for &b in words.remainder() {
        h = (h.rotate_left(5) ^ b as u64).wrapping_mul(K);
    }
    h
}

impl<A: Eq + Hash + Copy> DuplicateCache<A> {
    /// A cache of `capacity` replies; `seed` keys its hashing (give it real randomness).
    pub fn new(capacity: usize, seed: u64) -> Self {
        DuplicateCache {
            // Twice the entries: removals leave tombstones, and a table at most half full cleans
            // them up in place instead of growing (which would allocate on the call path).
            map: HashMap::with_capacity_and_hasher(2 * capacity.max(1), KeyHashing { start: seed | 1 }),
            order: VecDeque::with_capacity(capacity.max(1)),
            capacity: capacity.max(1),
            spare: Vec::new(),
        }
    }

    /// Calls remembered, in progress or answered (at most the capacity).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No call is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Looks a call up; records it as in progress when new.
    pub fn check(&mut self, xid: u32, from: A, hash: u64) -> Lookup<'_> {
        let key = (xid, from);
        let fresh = match self.map.get(&key) {
            Some(e) if e.hash == hash => false,
            Some(_) => {
                // Same xid from the same client but another call: the old entry is stale.
                if let Some(old) = self.map.remove(&key) {
                    self.spare.push(old.reply);
                }
                self.order.retain(|k| *k != key);
                true
            }
            None => true,
        };
        if fresh {
            while self.map.len() >= self.capacity {
                let Some(old) = self.order.pop_front() else { break };
                if let Some(e) = self.map.remove(&old) {
                    self.spare.push(e.reply);
                }
            }
            let mut reply = self.spare.pop().unwrap_or_default();
            reply.clear();
            self.map.insert(key, Entry { hash, done: false, reply });
            self.order.push_back(key);
            return Lookup::New;
        }
        let e = &self.map[&key];
        if e.done {
            Lookup::Replay(&e.reply)
        } else {
            Lookup::InProgress
        }
    }

    /// Records the reply sent for a call that [`check`](Self::check) called new: its header,
    /// then its body (kept as one message).
    pub fn complete(&mut self, xid: u32, from: A, hash: u64, head: &[u8], body: &[u8]) {
        if let Some(e) = self.map.get_mut(&(xid, from)) {
            if e.hash == hash {
                e.reply.clear();
                e.reply.extend_from_slice(head);
                e.reply.extend_from_slice(body);
                e.done = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmission_replays_and_new_calls_run() {
        let mut c = DuplicateCache::<u16>::new(2, 7);
        assert_eq!(c.check(1, 9, 100), Lookup::New);
        assert_eq!(c.check(1, 9, 100), Lookup::InProgress);
        c.complete(1, 9, 100, b"rep", b"ly");
        assert_eq!(c.check(1, 9, 100), Lookup::Replay(b"reply"));
        // Same xid, other client; same xid and client, other call.
        assert_eq!(c.check(1, 8, 100), Lookup::New);
        assert_eq!(c.check(1, 9, 101), Lookup::New);
        // Capacity 2: the oldest went.
        assert_eq!(c.check(2, 9, 5), Lookup::New);
        assert_eq!(c.len(), 2);
        assert_eq!(c.check(1, 8, 100), Lookup::New);
    }

    #[test]
    fn hash_ignores_the_xid_only() {
        assert_eq!(call_hash(b"\x00\x00\x00\x01abc"), call_hash(b"\x00\x00\x00\x02abc"));
        assert_ne!(call_hash(b"\x00\x00\x00\x01abc"), call_hash(b"\x00\x00\x00\x01abd"));
        // Every byte of a longer call counts, in the words and in the tail.
        let base: Vec<u8> = (0..1445u32).map(|i| i as u8).collect();
        for at in [4, 11, 12, 700, 1443, 1444] {
            let mut m = base.clone();
            m[at] ^= 1;
            assert_ne!(call_hash(&m), call_hash(&base), "byte {at}");
        }
        assert_ne!(call_hash(&base[..100]), call_hash(&base[..101]));
    }
}
