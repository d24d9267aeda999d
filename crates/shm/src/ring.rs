//! A single-producer single-consumer ring of length-prefixed messages in shared memory, safe
//! against a hostile peer (Riddoch §4.1), in which a small message costs one cache-line transfer
//! each way: the consumer polls the message itself, not an index on another line (data then
//! flag, as in ShrimpRPC's mapped buffers and Aeron's log buffers).
//!
//! Layout: a [`RingControl`] block (the consumer index and the two "sleeping" tripwire flags,
//! each on its own 64-byte cache line) and a power-of-two data area mapped twice back to back,
//! so every record is one contiguous slice wherever it wraps. Positions are free-running byte
//! counts (mod 2^32). A record starts on a cache line: an 8-byte header, then the payload, the
//! whole padded to 64 bytes, so a record of up to 56 payload bytes (a null call's 32-byte RPC
//! header and a small body) is one line. A record of more than one line is followed by a guard
//! of [`GUARD`] bytes that neither side writes or reads: where the two CPUs are far apart, a
//! record of 17 lines (a 1 KiB message with its headers) otherwise cost ~0.25 µs more per round
//! trip than one of 16, because the reader's hardware prefetcher, following its reads of a long
//! record, fetched the lines right after it, the next record's, which the writer then had to take
//! back while writing them. (The floor's exchange in a fixed mailbox steps only at 18 lines; one
//! whose mailbox moves through memory as a ring's records do steps at 17, as the ring did.) The
//! header is one little-endian 64-bit word:
//!
//! ```text
//!  0                   32                                62    64
//!  +-------------------+---------------------------------+------+
//!  | stamp: !position  | payload length (bytes)          | kind |
//!  +-------------------+---------------------------------+------+
//! ```
//!
//! The producer writes the payload, then the header, last, with a release store followed by a
//! full fence (the order the tripwire needs). The consumer polls the header at its
//! own position: a record is there once its stamp is the complement of that position. Nothing
//! else ever matches: the initial zeroes do not (a position is a multiple of 64, so its
//! complement is never 0), a header left from an earlier lap carries an earlier position, and
//! payload bytes of an earlier lap that happen to look like a future header are erased first:
//! before publishing a record the producer reads the header word of the record after it, when
//! that space is free, and zeroes it if it would pass for that record's header (only the
//! producer writes free space, so the word cannot change before that record is published). When
//! the space is not free, the ring is full and that word is the header of the oldest unread
//! record, which names its own, earlier, position. There is no producer index.
//!
//! A message that does not fit one record is streamed as `PART` records ending with an `END`
//! record, with flow control through the consumer index.
//!
//! Each side keeps a private copy of its own position and only ever *reads* the peer's state,
//! validating it before use: the producer checks the consumer index with modular comparisons (it
//! only moves forward, by whole records, never past ours); the consumer reads each header once
//! into a local and bounds-checks it. A peer that writes garbage can make the ring report
//! [`RingError::Corrupt`], never read or write outside the mapping, panic or loop.
//!
//! The consumer publishes its index lazily (a quarter ring freed, the ring found drained, or
//! the producer waiting for space), so a producer with room to spare never pulls the consumer's
//! cache line.
//!
//! Sleeping (the tripwire): a consumer with nothing to read arms its "sleeping" flag and, unless
//! the record has come meanwhile, sleeps (FUTEX_WAIT) on the stamp of the header it waits for;
//! the producer, having published, reads the flag and wakes it. A producer short of space sleeps
//! on the consumer index the same way.

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use lowlat_sys as sys;

/// Bytes in a record header.
pub const RECORD_HEADER: usize = 8;
/// Records start on cache lines of this many bytes.
pub const LINE: usize = 64;
/// Bytes left unwritten after every record of more than one line (see the module's doc): the
/// consumer's hardware prefetcher, running ahead of its reads of a long record, then fetches
/// lines no one is writing instead of the next record's, which the producer may be writing.
pub const GUARD: usize = 16 * LINE;
/// Smallest ring data area (one page).
pub const MIN_RING: usize = 4096;
/// Largest ring data area: positions are 32-bit and must distinguish full from empty, and a
/// record's length must fit the header's 30 bits.
pub const MAX_RING: usize = 1 << 30;

const KIND_WHOLE: u64 = 1;
const KIND_PART: u64 = 2;
const KIND_END: u64 = 3;
const LEN_MASK: u64 = (1 << 30) - 1;

/// The header word of a record at `position` (see the module doc).
fn header_word(position: u32, kind: u64, len: usize) -> u64 {
    u64::from(!position) | (len as u64 & LEN_MASK) << 32 | kind << 62
}

/// What a ring operation found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The peer wrote something no honest peer writes; the connection cannot be trusted any more.
    #[error("ring corrupted by the peer: {what}")]
    Corrupt {
        /// Which invariant the peer broke.
        what: &'static str,
    },
    /// A message exceeds the configured maximum.
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Bytes of the message.
        len: usize,
        /// Bytes allowed.
        max: usize,
    },
}

fn corrupt(what: &'static str) -> RingError {
    RingError::Corrupt { what }
}

/// One index or flag alone on a cache line, so the two sides never false-share.
#[repr(C, align(64))]
pub struct CacheLine {
    /// The value; the other 60 bytes of the line are padding.
    pub v: AtomicU32,
}

/// The shared control block of one ring. `#[repr(C)]`: both processes agree on its layout.
#[repr(C)]
pub struct RingControl {
    /// Bytes ever consumed (mod 2^32); written only by the consumer, lazily.
    pub tail: CacheLine,
    /// Non-zero while the consumer sleeps waiting for a record: the producer's tripwire.
    pub consumer_sleeping: CacheLine,
    /// Non-zero while the producer sleeps waiting for `tail` to move.
    pub producer_sleeping: CacheLine,
}

/// Bytes of a [`RingControl`].
pub const CONTROL_SIZE: usize = std::mem::size_of::<RingControl>();
const _: () = assert!(CONTROL_SIZE == 3 * LINE);

/// How a producer wakes a sleeping consumer.
#[derive(Clone, Copy, Debug)]
pub enum Wake {
    /// FUTEX_WAKE on the stamp of the record just published (a consumer with one ring to watch).
    Futex,
    /// Ring an eventfd (a server watching many rings with epoll).
    Doorbell(RawFd),
    /// A consumer that sleeps either way: FUTEX_WAKE when it sleeps on the stamp (its flag
    /// [`SLEEPING`]), ring the eventfd when it waits in an event loop (its flag [`PARKED`], set
    /// by [`Consumer::park`]).
    FutexOrDoorbell(RawFd),
}

/// A consumer's "sleeping" flag while it sleeps on the stamp of the record it waits for.
pub const SLEEPING: u32 = 1;
/// A consumer's "sleeping" flag while it waits in an event loop for the producer's eventfd
/// ([`Wake::FutexOrDoorbell`]).
pub const PARKED: u32 = 2;

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
    /// mapped, page-aligned bytes where the second half aliases the first; both must stay
    /// mapped for as long as any copy of this `RingRef` (or a producer/consumer built from it)
    /// is used. `size` must be a power of two in `MIN_RING..=MAX_RING`.
    pub unsafe fn new(ctl: *mut RingControl, data: *mut u8, size: usize) -> RingRef {
        debug_assert!(size.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&size));
        RingRef {
            ctl: NonNull::new(ctl).expect("null ring control"),
            data: NonNull::new(data).expect("null ring data"),
            size: size as u32,
        }
    }

    /// The ring's shared control block (its atomics may change under us at any moment).
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

    /// Offset in the first copy of the data area of the line holding `position`.
    fn offset(&self, position: u32) -> usize {
        (position & self.mask() & !(LINE as u32 - 1)) as usize
    }

    /// The header word of the record at `position` (rounded down to its line).
    fn header(&self, position: u32) -> &AtomicU64 {
        // SAFETY: the offset is a multiple of 64 below `size`, so the 8 bytes lie inside the
        // first copy of the data area, aligned (the mapping is page-aligned). Both processes
        // access them only atomically (the payload around them is plain bytes, never this
        // word while it is a header).
        unsafe { AtomicU64::from_ptr(self.data.as_ptr().add(self.offset(position)).cast::<u64>()) }
    }

    /// The stamp half of the header word at `position`, as the futex the consumer sleeps on.
    fn stamp_futex(&self, position: u32) -> &AtomicU32 {
        let word: *mut u64 = self.header(position).as_ptr();
        // SAFETY: the low half (first four bytes, little-endian) of an aligned, mapped word.
        // This process only ever hands it to FUTEX_WAIT/WAKE, which compare and key it in the
        // kernel; Rust code reads and writes the word as a whole through `header`.
        unsafe { AtomicU32::from_ptr(word.cast::<u32>()) }
    }
}

/// Bytes a record with `len` payload bytes takes: whole cache lines, and the guard after a
/// record of more than one.
pub fn record_len(len: usize) -> usize {
    let lines = (RECORD_HEADER + len + LINE - 1) & !(LINE - 1);
    if lines > LINE {
        lines + GUARD
    } else {
        lines
    }
}

// Streaming sends chunks of half a ring, each a record of more than one line.
const _: () = assert!(MIN_RING / 2 >= 2 * LINE + GUARD);

/// The largest payload whose record fits in `free` bytes (a multiple of 64), if any.
fn largest_payload(free: usize) -> Option<usize> {
    if free >= 2 * LINE + GUARD {
        Some(free - RECORD_HEADER - GUARD)
    } else if free >= LINE {
        Some(LINE - RECORD_HEADER)
    } else {
        None
    }
}

/// Arms `flag` so the other side knows to wake us, then sleeps on `word` unless `pending` finds
/// the wait over; `pending` returns the value of `word` to sleep on while it is not. No lost
/// wake-up: the waker stores the word then reads the flag, both sequentially consistent, and we
/// store the flag then read the word.
fn tripwire_wait(flag: &AtomicU32, word: &AtomicU32, pending: impl FnOnce() -> Option<u32>, timeout: Duration) {
    flag.store(SLEEPING, Ordering::SeqCst);
    if let Some(seen) = pending() {
        sys::futex_wait(word, seen, timeout);
    }
    flag.store(0, Ordering::SeqCst);
}

/// The producing end of a ring.
#[derive(Debug)]
pub struct Producer {
    ring: RingRef,
    /// Our position: the only true copy.
    head: u32,
    /// The consumer index as last validated.
    tail_seen: u32,
    /// Where the payload of the record published last lies (offset, length), if it was a whole
    /// message and nothing has been written or lent since: see [`Producer::last_written`].
    last_whole: Option<(usize, usize)>,
    wake: Wake,
}

// SAFETY: a producer only holds pointers into a shared mapping that its owner keeps alive; it
// has no thread-affine state, so moving it to another thread is sound.
unsafe impl Send for Producer {}

impl Producer {
    /// Takes over the producing end of a freshly initialised (all-zero) ring.
    pub fn new(ring: RingRef, wake: Wake) -> Producer {
        Producer { ring, head: 0, tail_seen: 0, last_whole: None, wake }
    }

    /// The ring this end produces into.
    pub fn ring(&self) -> &RingRef {
        &self.ring
    }

    /// The largest payload one record can carry.
    pub fn max_record(&self) -> usize {
        largest_payload(self.ring.size()).unwrap_or(0)
    }

    /// Free bytes according to the last validated consumer index (a multiple of 64).
    fn free(&self) -> usize {
        self.ring.size() - self.head.wrapping_sub(self.tail_seen) as usize
    }

    /// Re-reads the consumer index, validating it: it only moves forward, never past our head,
    /// and in whole lines (records start on lines).
    pub fn refresh(&mut self) -> Result<u32, RingError> {
        let t = self.ring.ctl().tail.v.load(Ordering::Acquire);
        let advanced = t.wrapping_sub(self.tail_seen);
        let used = self.head.wrapping_sub(self.tail_seen);
        if advanced > used || t & (LINE as u32 - 1) != 0 {
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

    /// Asks the consumer to ring its eventfd ([`Consumer::ring_when_parked`]) when it frees
    /// space, for a producer about to wait in an event loop; returns whether `rec` bytes are
    /// free already (then there is nothing to wait for: [`unpark`](Self::unpark)). No lost
    /// wake-up: we store the flag then read the index, the consumer stores the index then reads
    /// the flag, all sequentially consistent.
    pub fn park(&mut self, rec: usize) -> Result<bool, RingError> {
        self.ring.ctl().producer_sleeping.v.store(PARKED, Ordering::SeqCst);
        self.has_room(rec)
    }

    /// Ends a wait begun by [`park`](Self::park): the consumer need ring no more.
    pub fn unpark(&self) {
        let flag = &self.ring.ctl().producer_sleeping.v;
        if flag.load(Ordering::Relaxed) != 0 {
            flag.store(0, Ordering::Relaxed);
        }
    }

    /// Sleeps (at most `timeout`) until the consumer frees space or is about to.
    pub fn block_for_space(&mut self, timeout: Duration) {
        let ctl = self.ring.ctl();
        let seen = self.tail_seen;
        let pending = || {
            let t = ctl.tail.v.load(Ordering::SeqCst);
            (t == seen).then_some(t)
        };
        tripwire_wait(&ctl.producer_sleeping.v, &ctl.tail.v, pending, timeout);
    }

    /// Writes one record of `len` payload bytes filled in place by `fill`, if it fits now.
    /// Returns `Ok(false)` (nothing written) when there is not yet room.
    fn try_write(&mut self, kind: u64, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<bool, RingError> {
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
        let off = self.ring.offset(self.head);
        // SAFETY: `off < size` and the record's `record_len(len) <= free <= size` bytes end
        // before `off + size`: inside the double mapping. The bytes between our head and the
        // consumer's tail belong to us alone by the ring protocol (an honest consumer never
        // touches them; a hostile one can only garble its own messages, which is not a
        // memory-safety matter for this process's Rust data).
        unsafe { std::slice::from_raw_parts_mut(self.ring.data.as_ptr().add(off + RECORD_HEADER), len) }
    }

    /// Publishes the record of `len` payload bytes at our head: erases the header word of the
    /// record after it if that space is free, then writes its own header, last.
    ///
    /// # Safety
    /// As for [`payload_at_head`](Self::payload_at_head).
    #[inline]
    unsafe fn commit(&mut self, kind: u64, len: usize) {
        let rec = record_len(len);
        let next = self.head.wrapping_add(rec as u32);
        // Free space comes in whole lines: either the next record's line is ours too, or the
        // ring is now full and that line holds the oldest unread record (leave it alone). Only
        // a word that would pass for the next record's header is erased, and it seldom is: an
        // unconditional store made the publication below wait for the consumer's copy of the
        // line (read a lap ago, or pulled in by its prefetcher) to be invalidated, which put a
        // 32-byte exchange at 1.6x the single-line floor.
        if self.free() > rec {
            let after = self.ring.header(next);
            if after.load(Ordering::Relaxed) as u32 == !next {
                after.store(0, Ordering::Relaxed);
            }
        }
        // A release for the payload and the erasure above; then a full fence, so that the flag
        // load below cannot pass the store, which is what makes the tripwire lose no wake-up.
        // A store and a fence, not a locked exchange: the exchange holds the line the consumer
        // is polling while it completes, and put a tenth of null calls a line transfer later
        // (p90 0.50 -> 0.39 us, p99 0.53 -> 0.44 us when it went).
        self.ring.header(self.head).store(header_word(self.head, kind, len), Ordering::Release);
        fence(Ordering::SeqCst);
        self.last_whole = (kind == KIND_WHOLE).then_some((self.ring.offset(self.head) + RECORD_HEADER, len));
        let published = self.head;
        self.head = next;
        let ctl = self.ring.ctl();
        let sleeping = ctl.consumer_sleeping.v.load(Ordering::SeqCst);
        if sleeping != 0 {
            match self.wake {
                Wake::FutexOrDoorbell(fd) if sleeping == PARKED => sys::ring_fd(fd),
                Wake::Futex | Wake::FutexOrDoorbell(_) => sys::futex_wake(self.ring.stamp_futex(published)),
                Wake::Doorbell(fd) => sys::ring_fd(fd),
            }
        }
    }

    /// Lends the free space for one whole message of yet unknown length, built where it will be
    /// read: `build` gets up to `max_len` bytes and returns how many it wrote, published then as
    /// one record, or `None` to write nothing. The consumer's index is re-read only when less
    /// than half the ring is known to be free, so this seldom touches the consumer's cache line.
    #[inline]
    pub fn write_in_place(
        &mut self,
        max_len: usize,
        build: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, RingError> {
        if self.free() < self.ring.size() / 2 {
            self.refresh()?;
        }
        // The space lent may cover records already read, the last one written among them.
        self.last_whole = None;
        let Some(room) = largest_payload(self.free()) else {
            // Not even an empty record fits (the consumer has a full ring to read): nothing is
            // lent and nothing is written.
            return match build(&mut []) {
                Some(len) if len > 0 => Err(RingError::TooLarge { len, max: 0 }),
                _ => Ok(None),
            };
        };
        // A message of up to `lend` bytes takes `record_len(lend) <= free` bytes.
        let lend = room.min(max_len);
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

    /// The message published last, read back from where it was written, if it went as one
    /// record and nothing has been written or lent since (for a sender that must send it again
    /// and kept no copy). The consumer may have read it already: its bytes stay as they were
    /// until the producer writes over them, which only a later write or lend does. A hostile
    /// consumer can change them: treat them as the peer's input, not as what was sent.
    pub fn last_written(&self) -> Option<&[u8]> {
        let (off, len) = self.last_whole?;
        // SAFETY: `off` is a record's start (below `size`) plus its header, and that record,
        // published, took `record_len(len) <= size` bytes: `off + len < 2 * size`, inside the
        // double mapping. No builder holds these bytes (`last_whole` is cleared whenever space
        // is lent), and this producer writes nothing while the shared borrow lives.
        Some(unsafe { std::slice::from_raw_parts(self.ring.data.as_ptr().add(off), len) })
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
        let mut sent = 0;
        while let Some(need) = self.send_some(parts, total, &mut sent)? {
            wait(self, need)?;
        }
        Ok(())
    }

    /// Writes what fits now of the message gathered from `parts` (`total` bytes, of which
    /// `*sent` went before): as one record if it fits one, else in chunks, `*sent` counting
    /// them. Returns `None` once it is all written, or the size of the record that waits for
    /// room. Never waits: for a sender that keeps the rest and goes on with other work.
    pub fn send_some(&mut self, parts: &[&[u8]], total: usize, sent: &mut usize) -> Result<Option<usize>, RingError> {
        if record_len(total) <= self.ring.size() {
            if !self.try_write(KIND_WHOLE, total, |dst| gather(parts, 0, dst))? {
                return Ok(Some(record_len(total)));
            }
            *sent = total;
            return Ok(None);
        }
        // Half a ring per chunk: the consumer drains one half while we fill the other.
        let chunk = largest_payload(self.ring.size() / 2).expect("half of any ring holds a long record");
        while *sent < total {
            let len = chunk.min(total - *sent);
            let kind = if *sent + len == total { KIND_END } else { KIND_PART };
            if !self.try_write(kind, len, |dst| gather(parts, *sent, dst))? {
                return Ok(Some(record_len(len)));
            }
            *sent += len;
        }
        Ok(None)
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
    /// A whole record still in the ring: its payload's offset, length and record size.
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
    /// Our position: the only true copy.
    tail: u32,
    /// The position as last published to the producer.
    published: u32,
    /// Reassembly of a streamed message; keeps its capacity between messages.
    buf: Vec<u8>,
    assembling: bool,
    held: Held,
    max_message: usize,
    /// The eventfd to ring when we free space for a producer parked in an event loop
    /// ([`Producer::park`]); without one, a parked producer is woken as a sleeping one.
    producer_bell: Option<RawFd>,
}

// SAFETY: as for `Producer`: pointers into a mapping kept alive by the owner, no thread-affine
// state.
unsafe impl Send for Consumer {}

impl Consumer {
    /// Takes over the consuming end of a ring; a message longer than `max_message` bytes (the
    /// records of a streamed one together) is refused with [`RingError::TooLarge`].
    pub fn new(ring: RingRef, max_message: usize) -> Consumer {
        Consumer {
            ring,
            tail: 0,
            published: 0,
            buf: Vec::new(),
            assembling: false,
            held: Held::Nothing,
            max_message,
            producer_bell: None,
        }
    }

    /// Rings `bell` (which the producer watches in its event loop) when we free space while the
    /// producer is parked ([`Producer::park`]).
    pub fn ring_when_parked(mut self, bell: RawFd) -> Consumer {
        self.producer_bell = Some(bell);
        self
    }

    /// The ring this end consumes from.
    pub fn ring(&self) -> &RingRef {
        &self.ring
    }

    /// Whether a record is published at our position (one shared read, sequentially
    /// consistent, for a server arming its tripwire: store the flag, then look).
    pub fn has_data(&self) -> bool {
        self.ring.header(self.tail).load(Ordering::SeqCst) as u32 == !self.tail
    }

    /// Sleeps (at most `timeout`) until the producer publishes the record we wait for, unless
    /// it already has.
    pub fn block_for_data(&self, timeout: Duration) {
        let header = self.ring.header(self.tail);
        let expected = !self.tail;
        let pending = || {
            let stamp = header.load(Ordering::SeqCst) as u32;
            (stamp != expected).then_some(stamp)
        };
        let ctl = self.ring.ctl();
        tripwire_wait(&ctl.consumer_sleeping.v, self.ring.stamp_futex(self.tail), pending, timeout);
    }

    /// Asks the producer to ring its eventfd ([`Wake::FutexOrDoorbell`]) when it publishes, for
    /// a consumer about to wait in an event loop; returns whether the record is there already
    /// (then there is nothing to wait for: [`unpark`](Self::unpark) and read it). No lost
    /// wake-up, as for a sleeper: we store the flag then read the header, the producer stores
    /// the header then reads the flag, all sequentially consistent.
    pub fn park(&self) -> bool {
        self.ring.ctl().consumer_sleeping.v.store(PARKED, Ordering::SeqCst);
        self.has_data()
    }

    /// Ends a wait begun by [`park`](Self::park): the producer need ring no more.
    pub fn unpark(&self) {
        self.ring.ctl().consumer_sleeping.v.store(0, Ordering::Relaxed);
    }

    /// Releases the message handed out last, if any.
    #[inline]
    pub fn release(&mut self) {
        match std::mem::replace(&mut self.held, Held::Nothing) {
            Held::Nothing => {}
            Held::InRing { rec, .. } => self.advance(rec),
            Held::Assembled => self.buf.clear(),
        }
    }

    /// Whether part of a streamed message has been read and the rest is still to come.
    pub fn assembling(&self) -> bool {
        self.assembling
    }

    /// Bytes of the reassembly buffer (grown for the largest streamed message since the last
    /// [`trim`](Self::trim), kept so that the next is assembled without allocating again).
    pub fn held(&self) -> usize {
        self.buf.capacity()
    }

    /// Gives back the reassembly buffer, unless a streamed message is being assembled or held.
    pub fn trim(&mut self) {
        if !self.assembling && self.held != Held::Assembled {
            self.buf = Vec::new();
        }
    }

    #[inline]
    fn advance(&mut self, rec: usize) {
        self.tail = self.tail.wrapping_add(rec as u32);
        let unpublished = self.tail.wrapping_sub(self.published) as usize;
        if unpublished >= self.ring.size() / 4 || self.ring.ctl().producer_sleeping.v.load(Ordering::Relaxed) != 0 {
            self.publish();
        }
    }

    /// Tells the producer how far we have read, and wakes it if it sleeps waiting for space.
    #[inline]
    fn publish(&mut self) {
        let ctl = self.ring.ctl();
        // For the tripwire, the flag load cannot pass this store (a fence, as in `commit`).
        ctl.tail.v.store(self.tail, Ordering::Release);
        fence(Ordering::SeqCst);
        self.published = self.tail;
        match (ctl.producer_sleeping.v.load(Ordering::SeqCst), self.producer_bell) {
            (0, _) => {}
            (PARKED, Some(bell)) => sys::ring_fd(bell),
            _ => sys::futex_wake(&ctl.tail.v),
        }
    }

    /// Advances towards the next complete message without blocking: absorbs any streamed
    /// chunks, and returns `Ok(true)` once a message is ready for [`Consumer::message`] (the
    /// message held is ready again until [`release`](Self::release)d).
    #[inline]
    pub fn poll(&mut self) -> Result<bool, RingError> {
        if self.held != Held::Nothing {
            return Ok(true);
        }
        // Each turn consumes one record of a ring that holds at most `size` bytes, and
        // reassembly is capped by `max_message`: a peer that never stops writing still cannot
        // keep us here for ever.
        loop {
            // One snapshot of the header, validated below; the acquire makes the payload the
            // producer wrote before it visible.
            let word = self.ring.header(self.tail).load(Ordering::Acquire);
            if word as u32 != !self.tail {
                // Drained: let a producer short of space see what we freed.
                if self.tail != self.published {
                    self.publish();
                }
                return Ok(false);
            }
            let len = (word >> 32 & LEN_MASK) as usize;
            let rec = record_len(len);
            if rec > self.ring.size() {
                return Err(corrupt("record length beyond the ring"));
            }
            let off = self.ring.offset(self.tail) + RECORD_HEADER;
            match word >> 62 {
                KIND_WHOLE => {
                    if self.assembling {
                        return Err(corrupt("whole message inside a streamed one"));
                    }
                    if len > self.max_message {
                        return Err(RingError::TooLarge { len, max: self.max_message });
                    }
                    self.held = Held::InRing { off, len, rec };
                    return Ok(true);
                }
                kind @ (KIND_PART | KIND_END) => {
                    if self.buf.len() + len > self.max_message {
                        return Err(RingError::TooLarge { len: self.buf.len() + len, max: self.max_message });
                    }
                    // SAFETY: `off + len < size + rec <= 2 * size`, checked above.
                    let src = unsafe { std::slice::from_raw_parts(self.ring.data.as_ptr().add(off), len) };
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
    /// [`Consumer::release`]. A hostile producer can change bytes in the ring while they are
    /// read: treat the contents as untrusted input.
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
    use crate::segment::{Layout, Segment};
    use std::os::fd::AsRawFd;

    /// A ring in private memory, for unit tests of the index logic (a real double mapping is
    /// exercised through `segment`).
    struct Local {
        _ctl: Box<RingControl>,
        _data: Vec<u64>,
        ring: RingRef,
    }

    fn local(size: usize) -> Local {
        let line = || CacheLine { v: AtomicU32::new(0) };
        let mut ctl = Box::new(RingControl { tail: line(), consumer_sleeping: line(), producer_sleeping: line() });
        // Twice the size, so a record crossing the end stays in bounds (no aliasing here, so
        // tests below avoid wrapping). Page-aligned as a mapping is: a header word must be
        // aligned, and lines must be lines.
        let mut data = vec![0u64; 2 * size / 8 + 512];
        let base = data.as_mut_ptr() as usize;
        let aligned = (base + 4095) & !4095;
        // SAFETY: both allocations outlive `ring` (kept together in `Local`); `aligned` leaves
        // at least `2 * size` bytes of `data` after it.
        let ring = unsafe { RingRef::new(&mut *ctl, aligned as *mut u8, size) };
        Local { _ctl: ctl, _data: data, ring }
    }

    fn no_wait(_: &mut Producer, _: usize) -> Result<(), RingError> {
        Err(corrupt("full"))
    }

    #[test]
    fn corrupt_headers_and_indices_are_reported() {
        let l = local(4096);
        // Published (the stamp names our position) but longer than the ring.
        l.ring.header(0).store(header_word(0, KIND_WHOLE, 4096), Ordering::SeqCst);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert_eq!(c.poll().unwrap_err(), corrupt("record length beyond the ring"));
        l.ring.header(0).store(header_word(0, 0, 4), Ordering::SeqCst);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert_eq!(c.poll().unwrap_err(), corrupt("unknown record kind"));
        l.ring.header(0).store(header_word(0, KIND_WHOLE, 5000), Ordering::SeqCst);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert_eq!(c.poll().unwrap_err(), corrupt("record length beyond the ring"));
        // A stamp that names another position is no record at all: nothing to read yet.
        l.ring.header(0).store(header_word(64, KIND_WHOLE, 4), Ordering::SeqCst);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert!(!c.poll().unwrap());

        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        // The consumer claims to have read what was never written.
        l.ring.ctl().tail.v.store(64, Ordering::SeqCst);
        assert!(p.refresh().is_err());
        let mut p = Producer::new(l.ring, Wake::Futex);
        assert!(p.try_write_whole(100, |_| ()).unwrap());
        // Or to stop in the middle of a line.
        l.ring.ctl().tail.v.store(8, Ordering::SeqCst);
        assert!(p.refresh().is_err());
    }

    #[test]
    fn whole_messages_round_trip_and_release_frees_space() {
        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert!(!c.poll().unwrap());
        p.send(&[b"ab", b"", b"cde"], 1 << 20, no_wait).unwrap();
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), b"abcde");
        // Held until released: polling again returns the same message.
        assert!(c.poll().unwrap());
        c.release();
        // Published lazily: only once the consumer finds the ring drained.
        assert_eq!(l.ring.ctl().tail.v.load(Ordering::SeqCst), 0);
        assert!(!c.poll().unwrap());
        assert_eq!(l.ring.ctl().tail.v.load(Ordering::SeqCst), 64, "one line per small record");
        assert_eq!(record_len(p.max_record()), 4096, "the largest record fills the ring");
        assert!(p.try_write_whole(p.max_record(), |b| b.fill(1)).unwrap());
        assert!(!p.try_write_whole(0, |_| ()).unwrap());
        assert_eq!(p.send(&[&[0u8; 10][..]], 4, no_wait).unwrap_err(), RingError::TooLarge { len: 10, max: 4 });
        assert_eq!(record_len(0), 64);
        assert_eq!(record_len(56), 64);
        assert_eq!(record_len(57), 128 + GUARD);
        assert_eq!(largest_payload(64), Some(56));
        assert_eq!(largest_payload(128 + GUARD - 64), Some(56));
        assert_eq!(largest_payload(128 + GUARD), Some(120));
        assert_eq!(record_len(largest_payload(4096).unwrap()), 4096);
        assert_eq!(largest_payload(0), None);
    }

    #[test]
    fn the_guard_after_a_long_record_is_skipped_and_never_written() {
        let l = local(4096);
        // SAFETY: the data area's first copy is `4096` bytes of this test's own allocation, and
        // neither end of the ring exists yet.
        unsafe { std::ptr::write_bytes(l.ring.data.as_ptr(), 0xAA, 4096) };
        let mut p = Producer::new(l.ring, Wake::Futex);
        let mut c = Consumer::new(l.ring, 1 << 20);
        // Two lines of message, then the guard; a one-line message has none.
        p.send(&[&[1u8; 100][..]], 1 << 20, no_wait).unwrap();
        p.send(&[&[2u8; 50][..]], 1 << 20, no_wait).unwrap();
        p.send(&[&[3u8; 60][..]], 1 << 20, no_wait).unwrap();
        for (fill, len) in [(1u8, 100), (2, 50), (3, 60)] {
            assert!(c.poll().unwrap());
            assert_eq!(c.message(), &vec![fill; len][..]);
            c.release();
        }
        assert!(!c.poll().unwrap());
        assert_eq!(l.ring.ctl().tail.v.load(Ordering::SeqCst) as usize, 128 + GUARD + 64 + 128 + GUARD);
        // SAFETY: as above; both ends are idle.
        let data = unsafe { std::slice::from_raw_parts(l.ring.data.as_ptr(), 4096) };
        assert!(data[128..128 + GUARD].iter().all(|&b| b == 0xAA), "the producer wrote into a guard");
        let second_guard = 128 + GUARD + 64 + 128;
        assert!(data[second_guard..second_guard + GUARD].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn messages_built_in_place_take_only_what_they_wrote() {
        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        let mut c = Consumer::new(l.ring, 1 << 20);
        // The whole free space is lent, capped by the caller's maximum.
        assert_eq!(p.write_in_place(1 << 20, |b| Some(b.len())).unwrap(), Some(4096 - RECORD_HEADER - GUARD));
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
    fn the_last_whole_message_reads_back_until_the_next_write_or_lend() {
        let l = local(4096);
        let mut p = Producer::new(l.ring, Wake::Futex);
        let mut c = Consumer::new(l.ring, 1 << 20);
        assert_eq!(p.last_written(), None, "nothing written yet");
        assert_eq!(
            p.write_in_place(1 << 20, |b| {
                b[..4].copy_from_slice(b"call");
                Some(4)
            }),
            Ok(Some(4))
        );
        // Read (and released) by the consumer: the bytes are still as written.
        assert!(c.poll().unwrap());
        c.release();
        assert!(!c.poll().unwrap());
        assert_eq!(p.last_written(), Some(&b"call"[..]));
        // A streamed message is no single record: nothing to read back.
        let big = vec![3u8; 5000];
        p.send(&[&big], 1 << 20, |_, _| -> Result<(), RingError> {
            while c.poll()? {
                c.release();
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(p.last_written(), None);
        assert!(p.try_write_whole(2, |b| b.copy_from_slice(b"ok")).unwrap());
        assert_eq!(p.last_written(), Some(&b"ok"[..]));
        // Space lent, even if nothing is published, may have been written over.
        assert_eq!(p.write_in_place(1 << 20, |_| None), Ok(None));
        assert_eq!(p.last_written(), None);
    }

    #[test]
    fn a_reassembly_buffer_is_given_back_only_between_messages() {
        let (_seg, mut p, mut c) = mapped();
        let msg: Vec<u8> = (0..300_000).map(|i| i as u8).collect();
        let mut got = Vec::new();
        let mut trimmed_midway = false;
        p.send(&[&msg], 1 << 20, |_, _| -> Result<(), RingError> {
            if c.poll()? {
                got = c.message().to_vec();
                c.release();
            } else if c.held() > 0 && !trimmed_midway {
                // A message in progress keeps its bytes.
                c.trim();
                assert!(c.held() > 0);
                trimmed_midway = true;
            }
            Ok(())
        })
        .unwrap();
        if c.poll().unwrap() {
            c.trim();
            assert!(c.held() > 0, "a message held lost its buffer");
            got = c.message().to_vec();
            c.release();
        }
        assert!(trimmed_midway);
        assert_eq!(got, msg);
        assert!(c.held() >= 300_000, "kept for the next");
        c.trim();
        assert_eq!(c.held(), 0);
    }

    /// A ring in a real segment (the data area mapped twice), producer and consumer.
    fn mapped() -> (Segment, Producer, Consumer) {
        let (seg, _fd) = Segment::create(Layout { call_ring: 4096, result_ring: 4096 }).unwrap();
        let p = Producer::new(seg.call(), Wake::Futex);
        let c = Consumer::new(seg.call(), 1 << 20);
        (seg, p, c)
    }

    #[test]
    fn a_header_left_from_an_earlier_lap_is_not_a_new_record() {
        let (seg, mut p, mut c) = mapped();
        // A whole lap of one-line records, written before any is read, so the last one leaves
        // the first's header alone (the ring is full: that line is unread).
        for i in 0..64u8 {
            assert!(p.try_write_whole(56, |b| b.fill(i)).unwrap());
        }
        assert!(!p.try_write_whole(0, |_| ()).unwrap(), "the ring is full");
        for i in 0..64u8 {
            assert!(c.poll().unwrap());
            assert_eq!(c.message(), &[i; 56][..]);
            c.release();
        }
        // Back at offset 0 (position 4096): the lap-0 record is still there, intact and
        // plausible in every field but its stamp.
        let stale = seg.call().header(0).load(Ordering::SeqCst);
        assert_eq!(stale, header_word(0, KIND_WHOLE, 56));
        for _ in 0..3 {
            assert!(!c.poll().unwrap(), "a record of the previous lap was taken as new");
        }
        assert!(!c.has_data());
        // The real one, when it comes, is.
        assert!(p.try_write_whole(3, |b| b.copy_from_slice(b"new")).unwrap());
        assert!(c.has_data());
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), b"new");
    }

    #[test]
    fn payload_shaped_like_a_future_header_is_erased_before_it_is_reached() {
        let (seg, mut p, mut c) = mapped();
        // A message whose bytes at ring offset 64 are exactly the header the next lap's record
        // there will have (as an echoed payload chosen by anyone could be); its records, guard
        // included, take 2 KiB, two to a lap.
        let forged = header_word(4096 + 64, KIND_WHOLE, 5).to_le_bytes();
        let mut msg = vec![0x55u8; 2048 - GUARD - RECORD_HEADER];
        assert_eq!(record_len(msg.len()), 2048);
        msg[64 - RECORD_HEADER..64].copy_from_slice(&forged);
        for _ in 0..2 {
            assert!(p.try_write_whole(msg.len(), |b| b.copy_from_slice(&msg)).unwrap());
            assert!(c.poll().unwrap());
            assert_eq!(c.message(), &msg[..]);
            c.release();
        }
        assert!(!c.poll().unwrap());
        assert_eq!(seg.call().header(64).load(Ordering::SeqCst), u64::from_le_bytes(forged));
        // The next lap: one record at offset 0; the consumer then stands at position 4160,
        // where the forged header lay.
        assert!(p.try_write_whole(8, |b| b.fill(1)).unwrap());
        assert!(c.poll().unwrap());
        c.release();
        assert!(!c.poll().unwrap(), "stale payload bytes were taken for a record");
        assert_eq!(seg.call().header(64).load(Ordering::SeqCst), 0, "erased before publishing");
    }

    #[test]
    fn a_plausible_header_a_builder_wrote_past_its_message_is_erased_before_publishing() {
        let (seg, mut p, mut c) = mapped();
        // Two one-line records, read: the producer stands at position 128.
        for _ in 0..2 {
            assert!(p.try_write_whole(8, |b| b.fill(7)).unwrap());
            assert!(c.poll().unwrap());
            c.release();
        }
        assert!(!c.poll().unwrap());
        // A builder lent the free space writes, past the 8 bytes it then publishes, exactly the
        // header the record after it would have (as a procedure that writes a result and then
        // fails would leave it).
        let forged = header_word(192, KIND_WHOLE, 5).to_le_bytes();
        let n = p
            .write_in_place(1024, |b| {
                b[..8].fill(9);
                b[64 - RECORD_HEADER..64].copy_from_slice(&forged);
                Some(8)
            })
            .unwrap();
        assert_eq!(n, Some(8));
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), &[9; 8][..]);
        c.release();
        assert!(!c.poll().unwrap(), "bytes a builder left past its message were taken for a record");
        assert_eq!(seg.call().header(192).load(Ordering::SeqCst), 0, "erased before publishing");
    }

    #[test]
    fn a_parked_consumer_is_rung_through_the_eventfd_and_never_misses_a_record() {
        let (seg, _fd) = Segment::create(Layout { call_ring: 4096, result_ring: 4096 }).unwrap();
        let bell = sys::EventFd::new().unwrap();
        let mut p = Producer::new(seg.call(), Wake::FutexOrDoorbell(bell.as_raw_fd()));
        let mut c = Consumer::new(seg.call(), 1 << 20);
        // Parked with nothing there: a record then rings the eventfd.
        assert!(!c.park(), "nothing published yet");
        assert!(!bell.drain());
        assert!(p.try_write_whole(2, |b| b.copy_from_slice(b"hi")).unwrap());
        assert!(bell.drain(), "the producer did not ring a parked consumer");
        c.unpark();
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), b"hi");
        c.release();
        // A record published before parking is seen by `park` itself (no wait, no lost record).
        assert!(p.try_write_whole(3, |b| b.copy_from_slice(b"now")).unwrap());
        assert!(!bell.drain(), "nobody was parked: nothing to ring");
        assert!(c.park(), "the record already there was missed");
        c.unpark();
        assert!(c.poll().unwrap());
        assert_eq!(c.message(), b"now");
        c.release();
        // Unparked: the producer rings nothing.
        assert!(p.try_write_whole(1, |b| b[0] = 9).unwrap());
        assert!(!bell.drain(), "an unparked consumer was rung");
    }

    #[test]
    fn a_sleeping_consumer_is_woken_by_the_record_it_waits_for() {
        let (seg, mut p, mut c) = mapped();
        let ring = seg.call();
        // Advance off position 0 first, so the wait is on a later record's stamp.
        assert!(p.try_write_whole(1, |b| b[0] = 1).unwrap());
        assert!(c.poll().unwrap());
        c.release();
        assert!(!c.poll().unwrap());
        let sleeper = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            while !c.poll().unwrap() {
                c.block_for_data(Duration::from_secs(5));
                assert!(t.elapsed() < Duration::from_secs(4), "never woken");
            }
            (c.message().to_vec(), t.elapsed())
        });
        // Publish once the consumer is asleep (flag armed), so the wake-up is what ends the wait.
        let t = std::time::Instant::now();
        while ring.ctl().consumer_sleeping.v.load(Ordering::SeqCst) == 0 {
            assert!(t.elapsed() < Duration::from_secs(4), "consumer never slept");
            std::thread::yield_now();
        }
        assert!(p.try_write_whole(2, |b| b.copy_from_slice(b"hi")).unwrap());
        let (got, waited) = sleeper.join().unwrap();
        assert_eq!(got, b"hi");
        assert!(waited < Duration::from_secs(4), "woken only by the timeout: {waited:?}");
    }

    #[test]
    fn gather_spans_parts() {
        let mut d = [0u8; 4];
        gather(&[b"ab", b"cd", b"ef"], 1, &mut d);
        assert_eq!(&d, b"bcde");
    }
}
