//! The machine's throughput floor for shared memory (DESIGN principle 13): the floor's exchange
//! of [`super::shm_floor`], pipelined. Each direction is a ring of `records` one-line records
//! (a power of two, at most [`MAX_RING_RECORDS`]):
//!
//! ```text
//! segment: [ request ring: records x 64 bytes ][ result ring: records x 64 bytes ]
//! record:  [ payload: size - 8 bytes ... ][ sequence: u64 at byte 56 ]
//! ```
//!
//! Message `seq` (1, 2, ...) lives in record `seq % records` of each ring. The client writes
//! its payload, then its sequence word with release ordering (data then flag, principle 11); the
//! echoer spins on the next record's own sequence word, copies the payload into the same record
//! of the result ring and publishes it the same way. No indices on other lines: one line moves
//! each way per exchange. A client keeping at most `records` messages unanswered never
//! overwrites a record before its echo was taken, nor the echoer a result before it was read.
//!
//! A message whose sequence word also has [`REPORT_BIT`] set asks the echoer for the CPU time
//! its thread has used; the answer carries it (ns, little-endian) in the payload's first 8 bytes.
//! The echoer trusts nothing it reads: a sequence word other than the next one or the one the
//! record held a lap before ends the exchange.

use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use lowlat_sys::{self as sys, Mapping};

/// Bytes of a record: one cache line.
pub const RECORD: usize = 64;
/// Where a record's sequence word lies.
const SEQ_AT: usize = RECORD - 8;
/// The most records a ring may have (so the most messages a client keeps unanswered).
pub const MAX_RING_RECORDS: usize = 4096;
/// Set in a sequence word: the message asks for the echoer's CPU time.
pub const REPORT_BIT: u64 = 1 << 63;
/// Spins between looks at `give_up`.
const CHECK_EVERY: u32 = 1 << 12;

/// Bytes of the segment of a ring exchange of `records` records.
pub fn segment_len(records: usize) -> usize {
    (2 * records * RECORD).max(sys::memory::page_size())
}

/// Checks a ring exchange's shape: `records` a power of two up to [`MAX_RING_RECORDS`],
/// `size` a multiple of 8 from 8 to one record.
pub fn check_shape(records: usize, size: usize) -> Result<(), &'static str> {
    if !records.is_power_of_two() || records > MAX_RING_RECORDS {
        return Err("a floor ring has a power of two of records, at most 4096");
    }
    if size & 7 != 0 || !(8..=RECORD).contains(&size) {
        return Err("a pipelined floor message is a multiple of 8 bytes from 8 to 64 (one record)");
    }
    Ok(())
}

/// Which ring a side writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Writes requests, reads results.
    Client,
    /// Writes results, reads requests.
    Echoer,
}

/// One side's view of the two rings.
pub struct RingEnd {
    out: NonNull<u8>,
    inbox: NonNull<u8>,
    mask: u64,
    size: usize,
    _map: Mapping,
}

// SAFETY: the pointers lead into `_map`, which the end owns; nothing in it is tied to a thread.
unsafe impl Send for RingEnd {}

impl RingEnd {
    /// Maps a ring segment for `side`: `records` records each way, messages of `size` bytes.
    pub fn map(fd: &OwnedFd, side: Side, records: usize, size: usize) -> io::Result<RingEnd> {
        check_shape(records, size).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let len = segment_len(records);
        if !sys::check_sealed(fd, len)? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "floor ring segment not sealed or of the wrong size",
            ));
        }
        let map = Mapping::new(fd, 0, len, false)?;
        let base = NonNull::new(map.as_ptr()).ok_or(io::ErrorKind::InvalidData)?;
        // SAFETY: the result ring starts `records * RECORD` bytes in, inside the `len` mapped.
        let second = unsafe { base.add(records * RECORD) };
        let (out, inbox) = match side {
            Side::Client => (base, second),
            Side::Echoer => (second, base),
        };
        Ok(RingEnd { out, inbox, mask: records as u64 - 1, size, _map: map })
    }

    /// A fresh segment (all zero, sealed) and the echoer's end of it.
    pub fn create(records: usize, size: usize) -> io::Result<(RingEnd, OwnedFd)> {
        check_shape(records, size).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let fd = sys::sealed_memfd("lowlat-floor-ring", segment_len(records))?;
        let end = RingEnd::map(&fd, Side::Echoer, records, size)?;
        Ok((end, fd))
    }

    /// Records in each ring.
    pub fn records(&self) -> usize {
        self.mask as usize + 1
    }

    /// The record of `seq` in `ring`.
    #[inline]
    fn record(&self, ring: NonNull<u8>, seq: u64) -> *mut u8 {
        // SAFETY: `(seq & mask) * RECORD` is the start of one of the ring's `records` records,
        // inside the mapping.
        unsafe { ring.as_ptr().add(((seq & self.mask) as usize) * RECORD) }
    }

    #[inline]
    fn sequence(&self, ring: NonNull<u8>, seq: u64) -> &AtomicU64 {
        // SAFETY: the last 8 bytes of a 64-aligned record inside the mapping (8-aligned); only
        // ever accessed atomically, by both processes.
        unsafe { AtomicU64::from_ptr(self.record(ring, seq).add(SEQ_AT).cast::<u64>()) }
    }

    /// Writes `payload` (cut to `size - 8` bytes) into the record of `seq`, then the sequence
    /// word `word` (`seq`, with [`REPORT_BIT`] for a report), last.
    #[inline]
    pub fn send(&mut self, seq: u64, word: u64, payload: &[u8]) {
        let n = payload.len().min(self.size - 8);
        self.publish(seq, word, &payload[..n]);
    }

    /// Writes `bytes` (at most a record's payload, whatever the message size: a report's
    /// answer needs 8) into the record of `seq`, then `word`, last.
    #[inline]
    fn publish(&mut self, seq: u64, word: u64, bytes: &[u8]) {
        let n = bytes.len().min(SEQ_AT);
        // SAFETY: the record has `SEQ_AT` bytes before its sequence word; the peer reads them
        // only after seeing `word`, published below with release ordering, and (by the window
        // the client keeps) is done with this record's previous message.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.record(self.out, seq), n) };
        self.sequence(self.out, seq).store(word, Ordering::Release);
    }

    /// The sequence word of `seq`'s record in the peer's ring, as published.
    #[inline]
    pub fn peer_word(&self, seq: u64) -> u64 {
        self.sequence(self.inbox, seq).load(Ordering::Acquire)
    }

    /// The payload of `seq`'s record in the peer's ring (`size - 8` bytes). Untrusted bytes: a
    /// peer could change them while they are read.
    #[inline]
    pub fn received(&self, seq: u64) -> &[u8] {
        // SAFETY: `size - 8` bytes at the start of a record inside the mapping that lives as
        // long as `self`; the peer does not rewrite them until the window moves past `seq`.
        unsafe { std::slice::from_raw_parts(self.record(self.inbox, seq), self.size - 8) }
    }

    /// A report's answer: the echoer's CPU ns, in the payload's first 8 bytes.
    pub fn reported(&self, seq: u64) -> u64 {
        // SAFETY: the first 8 bytes of a record inside the mapping; a plain read of bytes the
        // peer published before the sequence word we acquired.
        let b = unsafe { std::ptr::read_unaligned(self.record(self.inbox, seq).cast::<[u8; 8]>()) };
        u64::from_le_bytes(b)
    }

    /// Echoes requests in order until `give_up` (asked every few thousand spins) says so;
    /// answers a report with the calling thread's CPU time. Fails on a sequence word that is
    /// neither the next one nor the one a lap before.
    pub fn echo(&mut self, mut give_up: impl FnMut() -> bool) -> Result<(), String> {
        let records = self.mask + 1;
        let mut next = 1u64;
        let mut spins = 0u32;
        loop {
            let word = self.peer_word(next);
            if word & !REPORT_BIT == next {
                if word & REPORT_BIT != 0 {
                    let cpu = sys::process::thread_cpu_time().as_nanos() as u64;
                    self.publish(next, word, &cpu.to_le_bytes());
                } else {
                    // SAFETY: the two rings do not overlap; each record has `size - 8 <= SEQ_AT`
                    // payload bytes; the request's were published before the word acquired.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.record(self.inbox, next),
                            self.record(self.out, next),
                            self.size - 8,
                        )
                    };
                    self.sequence(self.out, next).store(word, Ordering::Release);
                }
                next += 1;
                continue;
            }
            let lap_before = next.saturating_sub(records);
            if word & !REPORT_BIT != lap_before {
                return Err(format!("floor client wrote sequence {word:#x} where {next} or {lap_before} belongs"));
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins & (CHECK_EVERY - 1) == 0 && give_up() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn shapes_are_checked() {
        assert!(check_shape(64, 32).is_ok());
        assert!(check_shape(1, 8).is_ok());
        assert!(check_shape(3, 32).is_err());
        assert!(check_shape(8192, 32).is_err());
        assert!(check_shape(64, 72).is_err());
        assert!(check_shape(64, 12).is_err());
        assert!(RingEnd::create(0, 32).is_err());
    }

    #[test]
    fn a_window_of_requests_is_echoed_in_order_with_a_report() {
        let (mut echoer, fd) = RingEnd::create(8, 32).unwrap();
        let mut client = RingEnd::map(&fd, Side::Client, 8, 32).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let t = std::thread::spawn(move || echoer.echo(|| s2.load(Ordering::Relaxed)));
        let mut answered = 0u64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        for seq in 1..=1000u64 {
            while seq - answered > 8 {
                let a = answered + 1;
                if client.peer_word(a) == a {
                    assert_eq!(client.received(a)[..8], a.to_le_bytes());
                    answered = a;
                }
                assert!(std::time::Instant::now() < deadline);
            }
            let mut p = [0u8; 24];
            p[..8].copy_from_slice(&seq.to_le_bytes());
            client.send(seq, seq, &p);
        }
        while answered < 1000 {
            if client.peer_word(answered + 1) == answered + 1 {
                answered += 1;
            }
            assert!(std::time::Instant::now() < deadline);
        }
        client.send(1001, 1001 | REPORT_BIT, &[]);
        while client.peer_word(1001) != 1001 | REPORT_BIT {
            assert!(std::time::Instant::now() < deadline);
        }
        assert!(client.reported(1001) > 0, "the echoer's thread used some CPU");
        // A sequence word out of place ends the echo.
        client.send(1002, 5, &[]);
        let r = t.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert!(r.unwrap_err().contains("sequence"));
    }
}
