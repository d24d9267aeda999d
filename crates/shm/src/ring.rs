//! A single-producer single-consumer ring of length-prefixed messages in shared memory, safe
//! against a hostile peer (Riddoch §4.1).
//!
//! Layout: a [`RingControl`] block (producer index, consumer index and the two "sleeping"
//! tripwire flags, each on its own 64-byte cache line) and a power-of-two data area mapped twice
//! back to back, so every record is one contiguous slice wherever it wraps. Indices are free
//! running byte counts (mod 2^32); a record is an 8-byte header (`len`, `kind`) followed by the
//! payload padded to 8 bytes. A message that does not fit one record is streamed as `PART`
//! records ending with an `END` record, with flow control through the consumer index.
//!
//! Each side keeps a private copy of its own index and only ever *reads* the peer's, validating
//! it with modular comparisons (it can only move forward, and never past ours) before use.
//! Headers are read once into locals and bounds-checked. A peer that writes garbage can make the
//! ring report [`RingError::Corrupt`], never read or write outside the mapping, panic or loop.
//!
//! The producer publishes its index at once (a call is latency-critical); the consumer publishes
//! its index lazily (a quarter ring freed, the ring drained, or the producer waiting for space),
//! so a producer with room to spare never pulls the consumer's cache line.

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::sys;

/// Bytes in a record header.
pub const RECORD_HEADER: usize = 8;
/// Smallest ring data area (one page).
pub const MIN_RING: usize = 4096;
/// Largest ring data area: indices are 32-bit and must distinguish full from empty.
pub const MAX_RING: usize = 1 << 30;

const KIND_WHOLE: u32 = 0x4c57_0001;
const KIND_PART: u32 = 0x4c57_0002;
const KIND_END: u32 = 0x4c57_0003;

/// What a ring operation found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The peer wrote something no honest peer writes; the binding cannot be trusted any more.
    #[error("ring corrupted by the peer: {what}")]
    Corrupt { what: &'static str },
    /// A message exceeds the configured maximum.
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
}

fn corrupt(what: &'static str) -> RingError {
    RingError::Corrupt { what }
}

/// One index or flag alone on a cache line, so the two sides never false-share.
#[repr(C, align(64))]
pub struct CacheLine {
    pub v: AtomicU32,
}

/// The shared control block of one ring. `#[repr(C)]`: both processes agree on its layout.
#[repr(C)]
pub struct RingControl {
    /// Bytes ever produced (mod 2^32); written only by the producer.
    pub head: CacheLine,
    /// Bytes ever consumed (mod 2^32); written only by the consumer, lazily.
    pub tail: CacheLine,
    /// Non-zero while the consumer sleeps waiting for `head` to move: the producer's tripwire.
    pub consumer_sleeping: CacheLine,
    /// Non-zero while the producer sleeps waiting for `tail` to move.
    pub producer_sleeping: CacheLine,
}

/// Bytes of a [`RingControl`].
pub const CONTROL_SIZE: usize = std::mem::size_of::<RingControl>();
const _: () = assert!(CONTROL_SIZE == 256);

/// How a producer wakes a sleeping consumer.
#[derive(Clone, Copy, Debug)]
pub enum Wake {
    /// FUTEX_WAKE on the producer index (a consumer with one ring to watch).
    Futex,
    /// Ring an eventfd (a server watching many rings with epoll).
    Doorbell(RawFd),
}

/// Where one ring lives in this process. Plain pointers: the owner of the mappings guarantees
/// they outlive every `RingRef` made from them.
#[derive(Clone, Copy, Debug)]
pub struct RingRef {
    ctl: NonNull<RingControl>,
    /// Start of the data area, mapped twice: `2 * size` readable bytes.
    data: NonNull<u8>,
    size: u32,
}

impl RingRef {
    /// # Safety
    /// `ctl` must point at a mapped, 64-byte-aligned `RingControl`, and `data` at `2 * size`
    /// mapped bytes where the second half aliases the first; both must stay mapped for as long
    /// as any copy of this `RingRef` (or a producer/consumer built from it) is used. `size` must
    /// be a power of two in `MIN_RING..=MAX_RING`.
    pub unsafe fn new(ctl: *mut RingControl, data: *mut u8, size: usize) -> RingRef {
        debug_assert!(size.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&size));
        RingRef {
            ctl: NonNull::new(ctl).expect("null ring control"),
            data: NonNull::new(data).expect("null ring data"),
            size: size as u32,
        }
    }

    pub fn ctl(&self) -> &RingControl {
        // SAFETY: `new`'s contract keeps the control block mapped; all its fields are atomics,
        // so shared references are sound even while the peer writes.
        unsafe { self.ctl.as_ref() }
    }

    /// Data area bytes (one copy).
    pub fn size(&self) -> usize {
        self.size as usize
    }

    fn mask(&self) -> u32 {
        self.size - 1
    }
}

/// Bytes a record with `len` payload bytes takes.
pub fn record_len(len: usize) -> usize {
    RECORD_HEADER + ((len + 7) & !7)
}

/// Sleeps on `word` while it still holds `seen`, after arming `flag` so the other side knows to
/// wake us: arm, re-check, block (no lost wake-up: the waker stores `word` then reads `flag`,
/// both sequentially consistent, and we store `flag` then read `word`).
pub fn tripwire_wait(word: &AtomicU32, flag: &AtomicU32, seen: u32, timeout: Duration) {
    flag.store(1, Ordering::SeqCst);
    if word.load(Ordering::SeqCst) == seen {
        sys::futex_wait(word, seen, timeout);
    }
    flag.store(0, Ordering::SeqCst);
}

/// The producing end of a ring.
#[derive(Debug)]
pub struct Producer {
    ring: RingRef,
    /// Our index: the only true copy.
    head: u32,
    /// The consumer index as last validated.
    tail_seen: u32,
    wake: Wake,
}

// SAFETY: a producer only holds pointers into a shared mapping that its owner keeps alive; it
// has no thread-affine state, so moving it to another thread is sound.
unsafe impl Send for Producer {}

impl Producer {
    /// Takes over the producing end of a freshly initialised (all-zero) ring.
    pub fn new(ring: RingRef, wake: Wake) -> Producer {
        Producer { ring, head: 0, tail_seen: 0, wake }
    }

    pub fn ring(&self) -> &RingRef {
        &self.ring
    }

    /// The largest payload one record can carry.
    pub fn max_record(&self) -> usize {
        self.ring.size() - RECORD_HEADER
    }

    /// Free bytes according to the last validated consumer index.
    fn free(&self) -> usize {
        self.ring.size() - self.head.wrapping_sub(self.tail_seen) as usize
    }

    /// Re-reads the consumer index, validating it: it only moves forward, never past our head,
    /// and in whole records (multiples of 8).
    pub fn refresh(&mut self) -> Result<u32, RingError> {
        let t = self.ring.ctl().tail.v.load(Ordering::Acquire);
        let advanced = t.wrapping_sub(self.tail_seen);
        let used = self.head.wrapping_sub(self.tail_seen);
        if advanced > used || t & 7 != 0 {
            return Err(corrupt("consumer index moved backwards or past the producer"));
        }
        self.tail_seen = t;
        Ok(t)
    }

    /// Whether a record of `rec` bytes fits now (re-reading the consumer index if needed).
    pub fn has_room(&mut self, rec: usize) -> Result<bool, RingError> {
        if self.free() >= rec {
            return Ok(true);
        }
        self.refresh()?;
        Ok(self.free() >= rec)
    }

    /// Sleeps (at most `timeout`) until the consumer frees space or is about to.
    pub fn block_for_space(&mut self, timeout: Duration) {
        let ctl = self.ring.ctl();
        tripwire_wait(&ctl.tail.v, &ctl.producer_sleeping.v, self.tail_seen, timeout);
    }

    /// Writes one record of `len` payload bytes filled in place by `fill`, if it fits now.
    /// Returns `Ok(false)` (nothing written) when there is not yet room.
    fn try_write(&mut self, kind: u32, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<bool, RingError> {
        let rec = record_len(len);
        if rec > self.ring.size() {
            return Err(RingError::TooLarge { len, max: self.max_record() });
        }
        if !self.has_room(rec)? {
            return Ok(false);
        }
        // SAFETY: `has_room` saw `rec` bytes free at our head.
        fill(unsafe { self.payload_at_head(len) });
        // SAFETY: as above.
        unsafe { self.commit(kind, len) };
        Ok(true)
    }

    /// The `len` payload bytes of a record at our head, after its header.
    ///
    /// # Safety
    /// `record_len(len)` bytes must be free at our head (`free()`, as last validated).
    unsafe fn payload_at_head(&mut self, len: usize) -> &mut [u8] {
        let off = (self.head & self.ring.mask()) as usize;
        // SAFETY: `off < size` and the record's `record_len(len) <= free <= size` bytes end
        // before `off + size`: inside the double mapping. The bytes between our head and the
        // consumer's tail belong to us alone by the ring protocol (an honest consumer never
        // touches them; a hostile one can only garble its own messages, which is not a
        // memory-safety matter for this process's Rust data).
        unsafe { std::slice::from_raw_parts_mut(self.ring.data.as_ptr().add(off + RECORD_HEADER), len) }
    }

    /// Publishes the record of `len` payload bytes at our head: its header, then our index.
    ///
    /// # Safety
    /// As for [`payload_at_head`](Self::payload_at_head).
    unsafe fn commit(&mut self, kind: u32, len: usize) {
        let off = (self.head & self.ring.mask()) as usize;
        // SAFETY: the header is the first 8 of the free bytes the caller vouches for.
        unsafe {
            let p = self.ring.data.as_ptr().add(off);
            std::ptr::write_volatile(p.cast::<u32>(), len as u32);
            std::ptr::write_volatile(p.add(4).cast::<u32>(), kind);
        }
        self.head = self.head.wrapping_add(record_len(len) as u32);
        self.publish();
    }

    fn publish(&mut self) {
        let ctl = self.ring.ctl();
        // The swap is sequentially consistent (a locked instruction on x86): the flag load below
        // cannot be reordered before it, which is what makes the tripwire lose no wake-up.
        ctl.head.v.swap(self.head, Ordering::SeqCst);
        if ctl.consumer_sleeping.v.load(Ordering::SeqCst) != 0 {
            match self.wake {
                Wake::Futex => sys::futex_wake(&ctl.head.v),
                Wake::Doorbell(fd) => sys::eventfd_ring(fd),
            }
        }
    }

    /// Lends the free space for one whole message of yet unknown length, built where it will be
    /// read: `build` gets up to `max_len` bytes and returns how many it wrote, published then as
    /// one record, or `None` to write nothing. The consumer's index is re-read only when less
    /// than half the ring is known to be free, so this seldom touches the consumer's cache line.
    pub fn write_in_place(
        &mut self,
        max_len: usize,
        build: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, RingError> {
        if self.free() < self.ring.size() / 2 {
            self.refresh()?;
        }
        let Some(room) = self.free().checked_sub(RECORD_HEADER) else {
            // Not even an empty record fits (the consumer has a full ring to read): nothing is
            // lent and nothing is written.
            return match build(&mut []) {
                Some(len) if len > 0 => Err(RingError::TooLarge { len, max: 0 }),
                _ => Ok(None),
            };
        };
        // Free space comes in multiples of 8 (whole records), so a message of up to `lend`
        // bytes takes `record_len(lend) <= free` bytes.
        let lend = room.min(max_len).min(self.max_record());
        // SAFETY: `record_len(lend) <= free` (above).
        let Some(len) = build(unsafe { self.payload_at_head(lend) }) else {
            return Ok(None);
        };
        if len > lend {
            return Err(RingError::TooLarge { len, max: lend });
        }
        // SAFETY: `len <= lend`, so its record fits as `lend`'s does.
        unsafe { self.commit(KIND_WHOLE, len) };
        Ok(Some(len))
    }

    /// Writes a whole message of `len` bytes in place if it fits in one record and there is room
    /// now. `Ok(false)`: no room yet.
    pub fn try_write_whole(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<bool, RingError> {
        self.try_write(KIND_WHOLE, len, fill)
    }

    /// Sends a message gathered from `parts`, streaming it in chunks when it does not fit one
    /// record. `wait(self, need)` is called whenever fewer than `need` bytes are free; it must
    /// return once the consumer may have freed space (or fail: timeout, dead peer).
    pub fn send<E: From<RingError>>(
        &mut self,
        parts: &[&[u8]],
        max_message: usize,
        mut wait: impl FnMut(&mut Producer, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total > max_message {
            return Err(RingError::TooLarge { len: total, max: max_message }.into());
        }
        if record_len(total) <= self.ring.size() {
            while !self.try_write(KIND_WHOLE, total, |dst| gather(parts, 0, dst))? {
                wait(self, record_len(total))?;
            }
            return Ok(());
        }
        // Half a ring per chunk: the consumer drains one half while we fill the other.
        let chunk = ((self.ring.size() / 2) - RECORD_HEADER) & !7;
        let mut sent = 0;
        while sent < total {
            let len = chunk.min(total - sent);
            let kind = if sent + len == total { KIND_END } else { KIND_PART };
            while !self.try_write(kind, len, |dst| gather(parts, sent, dst))? {
                wait(self, record_len(len))?;
            }
            sent += len;
        }
        Ok(())
    }
}

/// Copies bytes `skip..skip + dst.len()` of the concatenation of `parts` into `dst`.
fn gather(parts: &[&[u8]], mut skip: usize, dst: &mut [u8]) {
    let mut at = 0;
    for p in parts {
        if at == dst.len() {
            break;
        }
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        let n = (p.len() - skip).min(dst.len() - at);
        dst[at..at + n].copy_from_slice(&p[skip..skip + n]);
        at += n;
        skip = 0;
    }
}

/// What the consumer holds between handing out a message and its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    Nothing,
    /// A whole record still in the ring: its offset, length and record size.
    InRing {
        off: usize,
        len: usize,
        rec: usize,
    },
    /// A streamed message, complete in the reassembly buffer.
    Assembled,
}

/// The consuming end of a ring, handing out whole messages.
#[derive(Debug)]
pub struct Consumer {
    ring: RingRef,
    /// Our index: the only true copy.
    tail: u32,
    /// The index as last published to the producer.
    published: u32,
    /// The producer index as last validated.
    head_seen: u32,
    /// Reassembly of a streamed message; keeps its capacity between messages.
    buf: Vec<u8>,
    assembling: bool,
    held: Held,
    max_message: usize,
}

// SAFETY: as for `Producer`: pointers into a mapping kept alive by the owner, no thread-affine
// state.
unsafe impl Send for Consumer {}

impl Consumer {
    pub fn new(ring: RingRef, max_message: usize) -> Consumer {
        Consumer {
            ring,
            tail: 0,
            published: 0,
            head_seen: 0,
            buf: Vec::new(),
            assembling: false,
            held: Held::Nothing,
            max_message,
        }
    }

    pub fn ring(&self) -> &RingRef {
        &self.ring
    }

    /// The producer index as last seen: a sleeper waits for it to change.
    pub fn head_seen(&self) -> u32 {
        self.head_seen
    }

    /// Whether the producer has published bytes we have not consumed (one shared read).
    pub fn has_data(&self) -> bool {
        self.ring.ctl().head.v.load(Ordering::SeqCst) != self.tail
    }

    /// Re-reads and validates the producer index: it only moves forward, by whole records,
    /// and never more than a ring ahead of us.
    fn refresh(&mut self) -> Result<(), RingError> {
        let h = self.ring.ctl().head.v.load(Ordering::Acquire);
        let avail = h.wrapping_sub(self.tail);
        let before = self.head_seen.wrapping_sub(self.tail);
        if avail as usize > self.ring.size() || h & 7 != 0 || avail < before {
            return Err(corrupt("producer index out of range"));
        }
        self.head_seen = h;
        Ok(())
    }

    /// Sleeps (at most `timeout`) until the producer publishes, unless it already has.
    pub fn block_for_data(&self, timeout: Duration) {
        let ctl = self.ring.ctl();
        tripwire_wait(&ctl.head.v, &ctl.consumer_sleeping.v, self.head_seen, timeout);
    }

    /// Releases the message handed out last, if any.
    pub fn release(&mut self) {
        match std::mem::replace(&mut self.held, Held::Nothing) {
            Held::Nothing => {}
            Held::InRing { rec, .. } => self.advance(rec),
            Held::Assembled => self.buf.clear(),
        }
    }

    fn advance(&mut self, rec: usize) {
        self.tail = self.tail.wrapping_add(rec as u32);
        let ctl = self.ring.ctl();
        let unpublished = self.tail.wrapping_sub(self.published) as usize;
        if self.tail == self.head_seen
            || unpublished >= self.ring.size() / 4
            || ctl.producer_sleeping.v.load(Ordering::Relaxed) != 0
        {
            ctl.tail.v.swap(self.tail, Ordering::SeqCst);
            self.published = self.tail;
            if ctl.producer_sleeping.v.load(Ordering::SeqCst) != 0 {
                sys::futex_wake(&ctl.tail.v);
            }
        }
    }

    /// Asks for the cache line after the one holding the record at `off`, if published bytes
    /// reach it, while that one is still on its way: the reader would otherwise miss on the two
    /// one after the other (a null call's record straddles two lines about half the time).
    /// Measured: null call 375 -> 343 ns; prefetching further lines made 1440-byte calls slower.
    #[inline(always)]
    fn prefetch_next_line(&self, off: usize, avail: usize) {
        const LINE: usize = 64;
        let next = (off | (LINE - 1)) + 1;
        if next < off + avail {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch is a hint that never faults; `next < off + avail <= 2 * size`
            // lies inside the double mapping anyway.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.ring.data.as_ptr().add(next).cast::<i8>());
            }
        }
    }

    /// Advances towards the next complete message without blocking: releases the previous one,
    /// absorbs any streamed chunks, and returns `Ok(true)` once a message is ready for
    /// [`Consumer::message`].
    pub fn poll(&mut self) -> Result<bool, RingError> {
        if self.held != Held::Nothing {
            return Ok(true);
        }
        // Each turn consumes one record of a ring that holds at most `size` bytes, and
        // reassembly is capped by `max_message`: a peer that never stops writing still cannot
        // keep us here for ever.
        loop {
            if self.tail == self.head_seen {
                self.refresh()?;
                if self.tail == self.head_seen {
                    return Ok(false);
                }
            }
            let avail = self.head_seen.wrapping_sub(self.tail) as usize;
            let off = (self.tail & self.ring.mask()) as usize;
            self.prefetch_next_line(off, avail);
            // SAFETY: `off + 8 <= size + 8 <= 2 * size`, inside the double mapping; volatile
            // reads take one snapshot of bytes the peer may be changing, validated below.
            let (len, kind) = unsafe {
                let p = self.ring.data.as_ptr().add(off);
                (std::ptr::read_volatile(p.cast::<u32>()) as usize, std::ptr::read_volatile(p.add(4).cast::<u32>()))
            };
            if len > self.ring.size() - RECORD_HEADER || record_len(len) > avail {
                return Err(corrupt("record length beyond the published data"));
            }
            let rec = record_len(len);
            match kind {
                KIND_WHOLE => {
                    if self.assembling {
                        return Err(corrupt("whole message inside a streamed one"));
                    }
                    if len > self.max_message {
                        return Err(RingError::TooLarge { len, max: self.max_message });
                    }
                    self.held = Held::InRing { off: off + RECORD_HEADER, len, rec };
                    return Ok(true);
                }
                KIND_PART | KIND_END => {
                    if self.buf.len() + len > self.max_message {
                        return Err(RingError::TooLarge { len: self.buf.len() + len, max: self.max_message });
                    }
                    // SAFETY: `off + 8 + len <= off + rec <= 2 * size`, checked above.
                    let src =
                        unsafe { std::slice::from_raw_parts(self.ring.data.as_ptr().add(off + RECORD_HEADER), len) };
                    self.buf.extend_from_slice(src);
                    self.advance(rec);
                    if kind == KIND_END {
                        self.assembling = false;
                        self.held = Held::Assembled;
                        return Ok(true);
                    }
                    self.assembling = true;
                }
                _ => return Err(corrupt("unknown record kind")),
            }
        }
    }

    /// The message [`Consumer::poll`] made ready, where it lies (in the ring, or in the
    /// reassembly buffer for a streamed one); empty if none is ready. Its bytes stay valid until
    /// [`Consumer::release`] or the next `poll`. A hostile producer can change bytes in the
    /// ring while they are read: treat the contents as untrusted input.
    pub fn message(&self) -> &[u8] {
        match self.held {
            Held::Nothing => &[],
            // SAFETY: `off + len <= 2 * size`, validated in `poll`; the record stays ours (the
            // producer may not reuse it) until `release` advances past it.
            Held::InRing { off, len, .. } => unsafe {
                std::slice::from_raw_parts(self.ring.data.as_ptr().add(off), len)
            },
            Held::Assembled => &self.buf,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring in private memory, for unit tests of the index logic (a real double mapping is
    /// exercised through `segment`).
    struct Local {
        _ctl: Box<RingControl>,
        _data: Vec<u64>,
        ring: RingRef,
    }

    fn local(size: usize) -> Local {
        let mut ctl = Box::new(RingControl {
            head: CacheLine { v: AtomicU32::new(0) },
            tail: CacheLine { v: AtomicU32::new(0) },
            consumer_sleeping: CacheLine { v: AtomicU32::new(0) },
            producer_sleeping: CacheLine { v: AtomicU32::new(0) },
        });
        // Twice the size, so a record crossing the end stays in bounds (no aliasing here, so
        // tests below avoid wrapping).
        let mut data = vec![0u64; 2 * size / 8];
        // SAFETY: both allocations outlive `ring` (kept together in `Local`).
        let ring = unsafe { RingRef::new(&mut *ctl, data.as_mut_ptr().cast(), size) };
        Local { _ctl: ctl, _data: data, ring }
    }

    #[test]
    fn corrupt_indices_and_headers_are_reported() {
        let l = local(4096);
        let mut c = Consumer::new(l.ring, 1 << 20);
        l.ring.ctl().head.v.store(8192, Ordering::SeqCst);
        assert_eq!(c.poll().unwrap_err(), corrupt("producer index out of range"));
        let mut c = Consumer::new(l.ring, 1 << 20);
        l.ring.ctl().head.v.store(16, Ordering::SeqCst);
        // SAFETY: writes the first header inside the local buffer.
        unsafe { *l.ring.data.as_ptr().cast::<u32>() = 100 };
        assert_eq!(c.poll().unwrap_err(), corrupt("record length beyond the published data"));
        let mut c = Consumer::new(l.ring, 1 << 20);
        // SAFETY: as above.
        unsafe {
            *l.ring.data.as_ptr().cast::<u32>() = 4;
            *l.ring.data.as_ptr().add(4).cast::<u32>() = 77;
        }
        assert_eq!(c.poll().unwrap_err(), corrupt("unknown record kind"));

        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        l.ring.ctl().tail.v.store(8, Ordering::SeqCst);
        assert!(p.refresh().is_err());
    }

    #[test]
    fn whole_messages_round_trip_and_release_frees_space() {
        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert!(!c.poll().unwrap());
        let no_wait = |_: &mut Producer, _| -> Result<(), RingError> { Err(corrupt("full")) };
        p.send(&[b"ab", b"", b"cde"], 1 << 20, no_wait).unwrap();
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), b"abcde");
        // Held until released: polling again returns the same message.
        assert!(c.poll().unwrap());
        c.release();
        assert!(!c.poll().unwrap());
        assert_eq!(l.ring.ctl().tail.v.load(Ordering::SeqCst), 16);
        assert!(p.try_write_whole(4088, |b| b.fill(1)).unwrap());
        assert!(!p.try_write_whole(0, |_| ()).unwrap());
        assert_eq!(p.send(&[&[0u8; 10][..]], 4, no_wait).unwrap_err(), RingError::TooLarge { len: 10, max: 4 });
    }

    #[test]
    fn messages_built_in_place_take_only_what_they_wrote() {
        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        let mut c = Consumer::new(l.ring, 1 << 20);
        // The whole free space is lent, capped by the caller's maximum.
        assert_eq!(p.write_in_place(1 << 20, |b| Some(b.len())).unwrap(), Some(4096 - RECORD_HEADER));
        assert!(c.poll().unwrap());
        c.release();
        assert_eq!(p.write_in_place(100, |b| Some(b.len())).unwrap(), Some(100));
        assert!(c.poll().unwrap());
        c.release();
        // Nothing asked, nothing written.
        assert_eq!(p.write_in_place(1 << 20, |_| None).unwrap(), None);
        assert!(!c.poll().unwrap());
        let n = p
            .write_in_place(1 << 20, |b| {
                b[..5].copy_from_slice(b"hello");
                Some(5)
            })
            .unwrap();
        assert_eq!(n, Some(5));
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), b"hello");
        c.release();
        // A builder claiming more than it was lent publishes nothing.
        let err = p.write_in_place(64, |_| Some(65)).unwrap_err();
        assert_eq!(err, RingError::TooLarge { len: 65, max: 64 });
        assert!(!c.poll().unwrap());
        // Filled to the brim, a ring lends nothing, and not even an empty message overwrites
        // unread data.
        let mut lens = Vec::new();
        while let Some(n) = p.write_in_place(1 << 20, |b| Some(b.len())).unwrap() {
            lens.push(n);
            assert!(lens.len() < 4, "the ring never filled: {lens:?}");
        }
        assert_eq!(p.write_in_place(1 << 20, |_| Some(0)).unwrap(), None);
        for n in lens {
            assert!(c.poll().unwrap());
            assert_eq!(c.message().len(), n);
            c.release();
        }
        assert!(!c.poll().unwrap());
    }

    #[test]
    fn gather_spans_parts() {
        let mut d = [0u8; 4];
        gather(&[b"ab", b"cd", b"ef"], 1, &mut d);
        assert_eq!(&d, b"bcde");
    }
}
