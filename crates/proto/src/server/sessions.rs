//! The server's table of sessions: a fixed number of entries, each found by the index its
//! token carries rather than by hashing (Firefly §4.2.5), with the policy for making room (which
//! idle session a full table or a full source gives up) and for letting sessions go (expiry,
//! closed connections).
//!
//! A type of its own, with nothing of binds, keys or counters in it: an endpoint served by
//! several threads has one table per thread, each over its own range of session indexes
//! ([`Shard`]), and a [`Census`] shared by them makes the endpoint's limits hold across them.

use std::sync::Arc;
use std::time::Instant;

use super::call::CallKey;
use super::connection::Session;
use super::shard::{Census, Shard};
use crate::auth::Tag;
use crate::wire::{token, Refusal};

/// Where a bind's session goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Placed {
    /// The session a retransmission of the same bind already has.
    Existing(usize),
    /// A free entry.
    Free(usize),
    /// An entry just freed by giving up an idle session.
    Reclaimed(usize),
}

/// A session's willingness to be given up (see `Session::reclaim_rank`), lowest first.
type Rank = (bool, bool, Instant);

/// Every session of one engine, by index. Entry `i` holds the session whose token carries the
/// index `base + i`.
#[derive(Debug)]
pub(super) struct SessionTable<A> {
    entries: Vec<Option<Session<A>>>,
    live: usize,
    /// The session index of entry 0 (the shard's first).
    base: usize,
    /// Sessions at once across the endpoint.
    max_live: usize,
    /// The counts shared with the endpoint's other engines, when there are others.
    census: Option<Arc<Census>>,
}

impl<A> SessionTable<A> {
    /// A table for `max_live` sessions (at most 65536: the index is 16 bits of the token) in
    /// `shard`'s range of indexes, counted with the endpoint's other engines' in `census`.
    pub(super) fn new(max_live: usize, shard: Shard, census: Option<Arc<Census>>) -> SessionTable<A> {
        let capacity = max_live.min(shard.span());
        SessionTable { entries: (0..capacity).map(|_| None).collect(), live: 0, base: shard.base(), max_live, census }
    }

    /// The session index (as a token carries it) of entry `i`.
    pub(super) fn index_of(&self, i: usize) -> u16 {
        (self.base + i) as u16
    }

    /// Sessions alive now.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// The session `token` names, if it is alive and the token is its own.
    #[inline]
    pub(super) fn get_mut(&mut self, token: u64) -> Option<&mut Session<A>> {
        match self.entries.get_mut((token::session(token) as usize).wrapping_sub(self.base)) {
            Some(Some(s)) if s.terms.token == token => Some(s),
            _ => None,
        }
    }

    /// The session of the call `key` and the slot the call is running on, if it still is.
    pub(super) fn running(&mut self, key: CallKey) -> Option<(&mut Session<A>, usize)> {
        let sess = self.get_mut(key.token)?;
        let i = sess.running(key)?;
        Some((sess, i))
    }

    /// Fills entry `i` (free, as [`place`](Self::place) found it) with `session`.
    pub(super) fn insert(&mut self, i: usize, session: Session<A>) -> &Session<A> {
        if let Some(old) = &self.entries[i] {
            self.left(old.source);
        }
        self.live += 1;
        if let Some(c) = &self.census {
            c.opened(session.source);
        }
        self.entries[i].insert(session)
    }

    /// A session of `source` went.
    fn left(&mut self, source: u128) {
        self.live -= 1;
        if let Some(c) = &self.census {
            c.closed(source);
        }
    }

    /// Sessions alive across the endpoint (this table's alone when it is the only one).
    fn live_in_endpoint(&self) -> usize {
        self.census.as_ref().map_or(self.live, |c| c.live())
    }

    /// The session in entry `i`.
    pub(super) fn at(&self, i: usize) -> Option<&Session<A>> {
        self.entries.get(i)?.as_ref()
    }

    /// Bytes held for results and reassembly across all sessions.
    pub(super) fn buffered_bytes(&self) -> usize {
        self.entries.iter().flatten().flat_map(|s| s.slots.iter()).map(|sl| sl.buffered_bytes()).sum()
    }

    fn remove(&mut self, i: usize) -> bool {
        let Some(gone) = self.entries[i].take() else { return false };
        self.left(gone.source);
        true
    }

    /// Lets go every session for which `expired` says so (given the session, it may also
    /// update it); returns how many went.
    fn retain(&mut self, mut expired: impl FnMut(&mut Session<A>) -> bool) -> u64 {
        let mut gone = 0u64;
        for i in 0..self.entries.len() {
            if self.entries[i].as_mut().is_some_and(&mut expired) {
                self.remove(i);
                gone += 1;
            }
        }
        gone
    }

    /// A session that sent anything since the last sweep is stamped with this sweep's time (no
    /// earlier than its last frame); one stamped at least `idle` ago goes. A session that has
    /// made no call goes once `unused` has passed since its bind, whatever else it sent. A
    /// session with a call arriving or running is not swept (its client waits). Returns how
    /// many went.
    pub(super) fn sweep(&mut self, now: Instant, idle: core::time::Duration, unused: core::time::Duration) -> u64 {
        self.retain(|sess| {
            let active = std::mem::take(&mut sess.active) || sess.busy();
            if active {
                sess.last_active = now;
            }
            if sess.called() {
                !active && now.saturating_duration_since(sess.last_active) >= idle
            } else {
                now.saturating_duration_since(sess.bound_at) >= unused
            }
        })
    }
}

impl<A: Eq> SessionTable<A> {
    /// Where the session of a bind from `from` goes: the one a retransmission of it (same
    /// address, nonce and cookie) already has, else a free entry, making room as a full
    /// endpoint or a source holding `max_per_source` sessions across the endpoint must (giving
    /// up the idle session of this table least worth keeping), else why not.
    pub(super) fn place(
        &mut self,
        from: &A,
        source: u128,
        nonce: u64,
        server_nonce: &Tag,
        max_per_source: usize,
    ) -> Result<Placed, Refusal> {
        let mut free = None;
        let mut of_source = 0;
        let mut reclaim: Option<(usize, Rank)> = None;
        let mut reclaim_in_source: Option<(usize, Rank)> = None;
        for (i, s) in self.entries.iter().enumerate() {
            let Some(s) = s else {
                free = free.or(Some(i));
                continue;
            };
            if s.nonce == nonce && s.bind_peer == *from && s.server_nonce == *server_nonce {
                return Ok(Placed::Existing(i));
            }
            let rank = s.reclaim_rank();
            let better = |best: &Option<(usize, Rank)>| match (rank, best) {
                (Some(r), Some((_, b))) => r < *b,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if better(&reclaim) {
                reclaim = rank.map(|r| (i, r));
            }
            if s.source == source {
                of_source += 1;
                if better(&reclaim_in_source) {
                    reclaim_in_source = rank.map(|r| (i, r));
                }
            }
        }
        if let Some(c) = &self.census {
            of_source = c.of_source(source);
        }
        if of_source >= max_per_source {
            let (i, _) = reclaim_in_source.ok_or(Refusal::SourceLimit)?;
            return Ok(self.reclaim(i));
        }
        if let Some(i) = free.filter(|_| self.live_in_endpoint() < self.max_live) {
            return Ok(Placed::Free(i));
        }
        let (i, _) = reclaim.ok_or(Refusal::TooManySessions)?;
        Ok(self.reclaim(i))
    }

    fn reclaim(&mut self, i: usize) -> Placed {
        if self.remove(i) {
            Placed::Reclaimed(i)
        } else {
            Placed::Free(i)
        }
    }

    /// Forgets a peer whose connection closed (stream transports): its slots lose their
    /// address, and sessions bound by it, and whose slots all came from it, go at once rather
    /// than at expiry. Returns how many went.
    pub(super) fn forget_peer(&mut self, peer: &A) -> u64 {
        self.retain(|sess| {
            for slot in sess.slots.iter_mut() {
                if slot.peer.as_ref() == Some(peer) {
                    slot.peer = None;
                }
            }
            let orphaned = sess.terms.reliable && sess.slots.iter().all(|sl| sl.peer.is_none());
            orphaned && (sess.bind_peer == *peer || sess.slots.iter().any(|sl| sl.call_no != 0))
        })
    }
}
