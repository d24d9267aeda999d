//! An endpoint served by several threads, each with an engine of its own: which part of the
//! token space each engine makes its sessions in ([`Shard`]), so that a transport can send every
//! frame of a session to the thread that holds it by reading the token alone, and the counts
//! that make the endpoint's session limits hold for the endpoint as a whole ([`Census`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::wire::token;

/// Which of `count` engines of one endpoint this is. Engine `index` makes its sessions in one
/// contiguous range of session indexes ([`base`](Self::base), [`span`](Self::span) of them),
/// so the owner of a token is its session index divided by the span: a division a classic-BPF
/// steering program does (`SO_ATTACH_REUSEPORT_CBPF`), and a subtraction on the call path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This engine's number, below `count`.
    pub index: u16,
    /// Engines serving the endpoint (at least 1).
    pub count: u16,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard::ONLY
    }
}

impl Shard {
    /// The one engine of an endpoint served by one thread.
    pub const ONLY: Shard = Shard { index: 0, count: 1 };

    /// Engine `index` of `count` (both clamped: at least one engine, `index` below `count`).
    pub fn new(index: u16, count: u16) -> Shard {
        let count = count.max(1);
        Shard { index: index.min(count - 1), count }
    }

    /// Session indexes each engine owns.
    pub fn span(&self) -> usize {
        (1usize << 16) / usize::from(self.count.max(1))
    }

    /// The first session index this engine owns.
    pub fn base(&self) -> usize {
        usize::from(self.index) * self.span()
    }

    /// The engine, of `count`, that owns the session `token` names (`count` for none: a token
    /// past the last engine's range, which no engine made).
    pub fn owner(token: u64, count: u16) -> u16 {
        let span = Shard { index: 0, count }.span();
        (usize::from(token::session(token)) / span) as u16
    }
}

/// The sessions alive across every engine of one endpoint, in all and per source, so that
/// `max_sessions` and `max_sessions_per_source` bound the endpoint rather than each engine.
/// Touched only where a session is made or goes (binds, sweeps, closed connections), never by
/// a call.
#[derive(Debug, Default)]
pub struct Census {
    live: AtomicUsize,
    per_source: Mutex<HashMap<u128, usize>>,
}

impl Census {
    /// Sessions alive across the endpoint.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Sessions alive across the endpoint whose source is `source`.
    pub fn of_source(&self, source: u128) -> usize {
        self.per_source.lock().unwrap_or_else(|p| p.into_inner()).get(&source).copied().unwrap_or(0)
    }

    pub(super) fn opened(&self, source: u128) {
        self.live.fetch_add(1, Ordering::AcqRel);
        *self.per_source.lock().unwrap_or_else(|p| p.into_inner()).entry(source).or_insert(0) += 1;
    }

    pub(super) fn closed(&self, source: u128) {
        self.live.fetch_sub(1, Ordering::AcqRel);
        let mut per_source = self.per_source.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                per_source.remove(&source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_owns_one_range_of_session_indexes() {
        for count in [1u16, 2, 3, 4, 7, 16] {
            for index in 0..count {
                let s = Shard::new(index, count);
                for k in [0, 1, s.span() - 1] {
                    let t = token::new(0xBEEF, (s.base() + k) as u16, 0x1234_5678);
                    assert_eq!(Shard::owner(t, count), index, "count {count}, index {index}, k {k}");
                }
            }
        }
        // Three engines leave the last index (65535) to none.
        assert_eq!(Shard::owner(token::new(1, u16::MAX, 0), 3), 3);
        assert_eq!(Shard::new(5, 0), Shard::ONLY);
    }

    #[test]
    fn the_census_counts_per_source_and_forgets_sources_that_left() {
        let c = Census::default();
        c.opened(7);
        c.opened(7);
        c.opened(9);
        assert_eq!((c.live(), c.of_source(7), c.of_source(9)), (3, 2, 1));
        c.closed(7);
        c.closed(9);
        assert_eq!((c.live(), c.of_source(7), c.of_source(9)), (1, 1, 0));
        assert!(!c.per_source.lock().unwrap().contains_key(&9));
    }
}
