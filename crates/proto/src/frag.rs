//! Fragmentation: a message larger than one frame travels as fragments of a fixed size, sent
//! with a window (not stop-and-wait) and retransmitted selectively.
//!
//! The receiver acknowledges with a cumulative count plus a bitmap of the next 64 fragments,
//! when the sender asks (`REQ_ACK` on every half window and at the end of a burst) or when it has
//! heard nothing for a whole timeout. The buffers keep their capacity between messages, so a
//! slot that has carried one large message carries the next without allocating.

use core::ops::Range;

/// Bits in an acknowledgement's bitmap.
pub const ACK_BITS: u32 = 64;

/// Why a received fragment was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FragError {
    /// The fragment's offset is not a multiple of the fragment size.
    #[error("fragment at offset {offset} is not on a {frag_size}-byte fragment boundary")]
    Misaligned {
        /// The fragment's byte offset in the message.
        offset: u32,
        /// The session's fragment size, in bytes.
        frag_size: u32,
    },
    /// The fragment is not as long as its place in the message says it must be.
    #[error("fragment at offset {offset} carries {len} bytes, expected {expected}")]
    BadLength {
        /// The fragment's byte offset in the message.
        offset: u32,
        /// Bytes it carries.
        len: usize,
        /// Bytes a fragment at that offset has.
        expected: usize,
    },
    /// The fragment gives the message another total length than the first one did.
    #[error("fragment says the message is {got} bytes, but it began as {expected}")]
    TotalChanged {
        /// The total this fragment gives.
        got: u32,
        /// The total the first fragment gave.
        expected: u32,
    },
    /// The fragment lies beyond the window above the first one missing: no honest sender sends
    /// it before that one is acknowledged.
    #[error("fragment {index} lies beyond the window, which ends before fragment {window_end}")]
    BeyondWindow {
        /// The fragment's index in the message.
        index: u32,
        /// The first index past the window.
        window_end: u32,
    },
}

fn nfrags(total: u32, frag_size: u32) -> u32 {
    if total == 0 {
        1
    } else {
        total.div_ceil(frag_size)
    }
}

fn bit(bits: &[u64], i: u32) -> bool {
    bits[(i / 64) as usize] & (1u64 << (i % 64)) != 0
}

fn set_bit(bits: &mut [u64], i: u32) -> bool {
    let w = &mut bits[(i / 64) as usize];
    let m = 1u64 << (i % 64);
    let was = *w & m != 0;
    *w |= m;
    !was
}

fn reset_bits(bits: &mut Vec<u64>, n: u32) {
    bits.clear();
    bits.resize(n.div_ceil(64) as usize, 0);
}

/// Fragments chosen to go out, collected before they are emitted (choosing borrows the sender,
/// emitting borrows the message). Each entry is the fragment index with `REQ_ACK` in the top
/// bit, so an empty burst is 512 zeroed bytes, not 128 padded pairs written one field at a time
/// (which cost the single-fragment call ~10 ns per side).
pub struct Burst {
    items: [u32; Burst::CAPACITY],
    len: usize,
}

impl Burst {
    /// Twice the largest window: a retransmission round plus new fragments.
    pub const CAPACITY: usize = 128;
    const REQ_ACK: u32 = 1 << 31;

    /// An empty burst.
    pub fn new() -> Burst {
        Burst { items: [0; Burst::CAPACITY], len: 0 }
    }

    /// Adds fragment `i` (asking for an acknowledgement if `req_ack`); ignored when full (the
    /// retransmission timer sends what did not fit).
    pub fn push(&mut self, i: u32, req_ack: bool) {
        if self.len < Burst::CAPACITY {
            self.items[self.len] = (i & !Burst::REQ_ACK) | if req_ack { Burst::REQ_ACK } else { 0 };
            self.len += 1;
        }
    }

    /// Asks for an acknowledgement on the last fragment.
    pub fn req_ack_on_last(&mut self) {
        if let Some(last) = self.items[..self.len].last_mut() {
            *last |= Burst::REQ_ACK;
        }
    }

    /// (fragment index, request an acknowledgement) in the order added.
    pub fn iter(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        self.items[..self.len].iter().map(|&x| (x & !Burst::REQ_ACK, x & Burst::REQ_ACK != 0))
    }
}

impl Default for Burst {
    fn default() -> Self {
        Burst::new()
    }
}

/// The sending side of one message.
#[derive(Clone, Debug, Default)]
pub struct FragSender {
    total: u32,
    frag_size: u32,
    n: u32,
    window: u32,
    acked: Vec<u64>,
    acked_count: u32,
    /// Lowest fragment not yet acknowledged.
    cum: u32,
    /// Next fragment never sent.
    next: u32,
}

impl FragSender {
    /// Prepares to send a message of `total` bytes.
    pub fn reset(&mut self, total: u32, frag_size: u32, window: u32) {
        self.total = total;
        self.frag_size = frag_size.max(1);
        self.n = nfrags(total, self.frag_size);
        self.window = window.max(2);
        reset_bits(&mut self.acked, self.n);
        self.acked_count = 0;
        self.cum = 0;
        self.next = 0;
    }

    /// Fragments in the message (1 for an empty message).
    pub fn fragments(&self) -> u32 {
        self.n
    }

    /// Byte range of fragment `i` in the message.
    pub fn range(&self, i: u32) -> Range<usize> {
        let start = i as usize * self.frag_size as usize;
        let end = (start + self.frag_size as usize).min(self.total as usize);
        start..end
    }

    /// Every fragment has been acknowledged.
    pub fn is_complete(&self) -> bool {
        self.acked_count == self.n
    }

    /// Whether every fragment has been sent at least once.
    pub fn all_sent(&self) -> bool {
        self.next == self.n
    }

    /// Marks every fragment acknowledged (the peer answered, so it has them all).
    pub fn mark_all_acked(&mut self) {
        for i in 0..self.n {
            set_bit(&mut self.acked, i);
        }
        self.acked_count = self.n;
        self.cum = self.n;
        self.next = self.n;
    }

    fn req_ack(&self, i: u32) -> bool {
        i + 1 == self.n || (i + 1).is_multiple_of(self.window / 2)
    }

    /// Marks the only fragment of a one-fragment message sent and returns its acknowledgement
    /// request; `None` for any other message (use [`send_new`](Self::send_new)). Most calls
    /// and results are one fragment, and this spares their senders collecting a [`Burst`].
    pub fn send_single(&mut self) -> Option<bool> {
        if self.n != 1 || self.next != 0 {
            return None;
        }
        self.next = 1;
        Some(self.req_ack(0))
    }

    /// Sends the never-sent fragments the window allows: `emit(index, req_ack)`.
    pub fn send_new(&mut self, mut emit: impl FnMut(u32, bool)) {
        let limit = self.n.min(self.cum.saturating_add(self.window));
        while self.next < limit {
            let i = self.next;
            self.next += 1;
            let last_of_burst = self.next == limit;
            emit(i, self.req_ack(i) || last_of_burst);
        }
    }

    /// Sends again every fragment sent but not acknowledged, asking for an acknowledgement on the
    /// last one. Returns how many were sent.
    pub fn resend_unacked(&mut self, mut emit: impl FnMut(u32, bool)) -> u32 {
        let mut pending = (self.cum..self.next).filter(|&i| !bit(&self.acked, i)).peekable();
        let mut count = 0;
        while let Some(i) = pending.next() {
            emit(i, pending.peek().is_none());
            count += 1;
        }
        count
    }

    /// Applies an acknowledgement: every fragment below `cum` and those set in `bitmap` (bit k is
    /// fragment `cum + k`). Returns the fragments the acknowledgement shows to be missing below
    /// the highest one received (lost, since they were overtaken), via `emit`, and then new ones.
    pub fn on_ack(&mut self, cum: u32, bitmap: u64, stalled: bool, mut emit: impl FnMut(u32, bool)) {
        let cum = cum.min(self.next);
        for i in self.cum..cum {
            if set_bit(&mut self.acked, i) {
                self.acked_count += 1;
            }
        }
        let mut highest = None;
        for k in 0..ACK_BITS {
            let i = cum.saturating_add(k);
            if i >= self.next {
                break;
            }
            if bitmap & (1u64 << k) != 0 {
                if set_bit(&mut self.acked, i) {
                    self.acked_count += 1;
                }
                highest = Some(i);
            }
        }
        while self.cum < self.n && bit(&self.acked, self.cum) {
            self.cum += 1;
        }
        // Gaps below the highest fragment received were overtaken: resend them. On a stall,
        // everything outstanding is presumed lost.
        let resend_below = if stalled { Some(self.next) } else { highest };
        if let Some(h) = resend_below {
            let gaps: u32 = (self.cum..h.min(self.next)).filter(|&i| !bit(&self.acked, i)).count() as u32;
            let mut left = gaps;
            for i in self.cum..h.min(self.next) {
                if !bit(&self.acked, i) {
                    left -= 1;
                    emit(i, left == 0);
                }
            }
        }
        self.send_new(emit);
    }
}

/// The receiving side of one message. Its buffer grows with the fragments that arrive, never
/// past the sender's window above the first one missing: a first fragment claiming a message
/// of megabytes makes it hold one window's worth, not the message (it once zeroed the whole
/// claimed length at once: one datagram of a bound session made the server commit 4 MiB).
#[derive(Clone, Debug, Default)]
pub struct FragReceiver {
    buf: Vec<u8>,
    total: u32,
    frag_size: u32,
    n: u32,
    /// Fragments the sender may have in flight (as [`FragSender`]'s window).
    window: u32,
    got: Vec<u64>,
    got_count: u32,
    cum: u32,
}

impl FragReceiver {
    /// Prepares to receive a message of `total` bytes (the caller has checked it is allowed)
    /// from a sender whose window is `window` fragments.
    pub fn reset(&mut self, total: u32, frag_size: u32, window: u32) {
        self.total = total;
        self.frag_size = frag_size.max(1);
        self.n = nfrags(total, self.frag_size);
        self.window = window.max(2);
        self.buf.clear();
        reset_bits(&mut self.got, self.n);
        self.got_count = 0;
        self.cum = 0;
    }

    /// Stores one fragment. Returns whether it was new.
    pub fn accept(&mut self, total: u32, offset: u32, data: &[u8]) -> Result<bool, FragError> {
        if total != self.total {
            return Err(FragError::TotalChanged { got: total, expected: self.total });
        }
        if !offset.is_multiple_of(self.frag_size) {
            return Err(FragError::Misaligned { offset, frag_size: self.frag_size });
        }
        let i = offset / self.frag_size;
        if i >= self.n {
            return Err(FragError::BadLength { offset, len: data.len(), expected: 0 });
        }
        // The sender sends fragment i only once those below i - window are acknowledged, so
        // received: the first we miss is never more than a window below it.
        let window_end = self.cum.saturating_add(self.window);
        if i >= window_end {
            return Err(FragError::BeyondWindow { index: i, window_end });
        }
        let start = offset as usize;
        let expected = (self.total as usize - start).min(self.frag_size as usize);
        if data.len() != expected {
            return Err(FragError::BadLength { offset, len: data.len(), expected });
        }
        if !set_bit(&mut self.got, i) {
            return Ok(false);
        }
        if self.buf.len() < start + expected {
            self.buf.resize(start + expected, 0);
        }
        self.buf[start..start + expected].copy_from_slice(data);
        self.got_count += 1;
        while self.cum < self.n && bit(&self.got, self.cum) {
            self.cum += 1;
        }
        Ok(true)
    }

    /// Every fragment of the message has arrived.
    pub fn is_complete(&self) -> bool {
        self.n > 0 && self.got_count == self.n
    }

    /// At least one fragment of the message has arrived.
    pub fn has_any(&self) -> bool {
        self.got_count > 0
    }

    /// The acknowledgement to send: cumulative count and bitmap of the next 64.
    pub fn ack_state(&self) -> (u32, u64) {
        let mut bitmap = 0u64;
        for k in 0..ACK_BITS {
            let i = self.cum.saturating_add(k);
            if i >= self.n {
                break;
            }
            if bit(&self.got, i) {
                bitmap |= 1u64 << k;
            }
        }
        (self.cum, bitmap)
    }

    /// The message's bytes (whole once [`is_complete`](Self::is_complete); before, up to the
    /// furthest fragment received, gaps as zeros).
    pub fn message(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes of the whole message, as its first fragment said.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Gives back memory held for an unusually large message.
    pub fn shrink(&mut self, keep: usize) {
        if self.buf.capacity() > keep {
            self.buf = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_keeps_order_and_flags_and_stops_at_capacity() {
        let mut b = Burst::new();
        assert_eq!(b.iter().count(), 0);
        b.req_ack_on_last(); // nothing to flag: no effect
        b.push(3, false);
        b.push(0x7fff_ffff, true);
        b.push(5, false);
        b.req_ack_on_last();
        assert_eq!(b.iter().collect::<Vec<_>>(), [(3, false), (0x7fff_ffff, true), (5, true)]);
        for i in 0..2 * Burst::CAPACITY as u32 {
            b.push(i, false);
        }
        assert_eq!(b.iter().count(), Burst::CAPACITY);
    }

    fn transfer(total: u32, frag: u32, window: u32, drop: impl Fn(u32, u32) -> bool) -> (Vec<u8>, u32) {
        let msg: Vec<u8> = (0..total).map(|i| (i * 7 + 3) as u8).collect();
        let mut tx = FragSender::default();
        let mut rx = FragReceiver::default();
        tx.reset(total, frag, window);
        rx.reset(total, frag, window);
        let mut sends = 0u32;
        let mut queue: Vec<(u32, bool)> = Vec::new();
        tx.send_new(|i, r| queue.push((i, r)));
        let mut rounds = 0;
        while !rx.is_complete() {
            rounds += 1;
            assert!(rounds < 10_000, "no progress");
            let batch = std::mem::take(&mut queue);
            let mut ack = None;
            for (i, req) in batch {
                sends += 1;
                if drop(i, sends) {
                    continue;
                }
                let r = tx.range(i);
                rx.accept(total, r.start as u32, &msg[r]).unwrap();
                if req && !rx.is_complete() {
                    ack = Some(rx.ack_state());
                }
            }
            match ack {
                Some((c, b)) => tx.on_ack(c, b, false, |i, r| queue.push((i, r))),
                None if queue.is_empty() && !rx.is_complete() => {
                    // A timeout: the receiver reports a stall.
                    let (c, b) = rx.ack_state();
                    tx.on_ack(c, b, true, |i, r| queue.push((i, r)));
                }
                None => {}
            }
        }
        (rx.message().to_vec(), sends)
    }

    #[test]
    fn windowed_transfer_without_loss_sends_each_fragment_once() {
        let (got, sends) = transfer(100_000, 1000, 16, |_, _| false);
        let want: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(got, want);
        assert_eq!(sends, 100);
    }

    #[test]
    fn lost_fragments_are_resent_selectively() {
        // Every fifth fragment is lost on its first transmission only.
        let dropped = std::cell::RefCell::new(std::collections::HashSet::new());
        let (got, sends) = transfer(64_000, 1000, 16, |i, _| i % 5 == 0 && dropped.borrow_mut().insert(i));
        assert_eq!(got.len(), 64_000);
        let want: Vec<u8> = (0..64_000u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(got, want);
        // Selective: only the lost ones (13 of 64) go again, not the whole window.
        assert!(sends <= 64 + 13 + 2, "sent {sends}");
    }

    #[test]
    fn empty_and_exact_messages() {
        assert_eq!(transfer(0, 100, 8, |_, _| false), (vec![], 1));
        assert_eq!(transfer(100, 100, 8, |_, _| false).1, 1);
        assert_eq!(transfer(101, 100, 8, |_, _| false).1, 2);
    }

    #[test]
    fn receiver_refuses_malformed_fragments() {
        let mut rx = FragReceiver::default();
        rx.reset(250, 100, 8);
        assert!(matches!(rx.accept(250, 50, &[0; 100]), Err(FragError::Misaligned { .. })));
        assert!(matches!(rx.accept(250, 200, &[0; 100]), Err(FragError::BadLength { expected: 50, .. })));
        assert!(matches!(rx.accept(250, 300, &[0; 10]), Err(FragError::BadLength { .. })));
        assert!(matches!(rx.accept(999, 0, &[0; 100]), Err(FragError::TotalChanged { .. })));
        assert_eq!(rx.accept(250, 0, &[1; 100]), Ok(true));
        assert_eq!(rx.accept(250, 0, &[1; 100]), Ok(false));
        assert_eq!(rx.ack_state(), (1, 0));
        rx.accept(250, 200, &[2; 50]).unwrap();
        assert_eq!(rx.ack_state(), (1, 0b10));
    }

    #[test]
    fn a_receiver_holds_what_came_within_the_window_not_what_was_claimed() {
        let (frag, window) = (1000u32, 16u32);
        let mut rx = FragReceiver::default();
        rx.reset(4 << 20, frag, window);
        // The last fragment alone, as no honest sender sends it first: refused, nothing held.
        let last = (4 << 20) / frag * frag;
        let tail = vec![9u8; ((4 << 20) - last) as usize];
        assert_eq!(
            rx.accept(4 << 20, last, &tail),
            Err(FragError::BeyondWindow { index: last / frag, window_end: 16 })
        );
        assert!(rx.buf.capacity() < 64 << 10, "holds {}", rx.buf.capacity());
        // The window's last fragment is taken: what is held is at most a window.
        assert_eq!(rx.accept(4 << 20, 15 * frag, &[1; 1000]), Ok(true));
        assert!(rx.message().len() <= (window * frag) as usize);
        assert_eq!(rx.ack_state(), (0, 1 << 15));
        // The window moves with the first missing fragment.
        assert!(rx.accept(4 << 20, 16 * frag, &[2; 1000]).is_err());
        assert_eq!(rx.accept(4 << 20, 0, &[3; 1000]), Ok(true));
        assert_eq!(rx.accept(4 << 20, 16 * frag, &[2; 1000]), Ok(true));
        assert_eq!(&rx.message()[..1000], &[3; 1000][..]);
        assert_eq!(&rx.message()[15_000..17_000], &[[1u8; 1000], [2u8; 1000]].concat()[..]);
    }
}
