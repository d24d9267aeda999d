//! TCP record marking (RFC 5531 §11): each record is one or more fragments, each preceded by a
//! four-byte big-endian header whose top bit marks the last fragment and whose other 31 bits give
//! the fragment's length.

use crate::RecordError;

const LAST: u32 = 1 << 31;

/// The four-byte header of a fragment of `len` bytes (at most 2^31 - 1); `last`: the fragment
/// ends its record.
pub fn fragment_header(len: usize, last: bool) -> [u8; 4] {
    debug_assert!(len < LAST as usize);
    (if last { LAST } else { 0 } | len as u32).to_be_bytes()
}

/// Appends `msg` to `out` as one record of fragments of at most `max_fragment` bytes.
pub fn frame_record(msg: &[u8], max_fragment: usize, out: &mut Vec<u8>) {
    let max_fragment = max_fragment.clamp(1, (LAST - 1) as usize);
    let mut chunks = msg.chunks(max_fragment).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&fragment_header(0, true));
        return;
    }
    while let Some(c) = chunks.next() {
        out.extend_from_slice(&fragment_header(c.len(), chunks.peek().is_none()));
        out.extend_from_slice(c);
    }
}

/// Makes a one-fragment record of a message written after four reserved bytes at `start`
/// (write `[0; 4]`, then the message, then call this): no copy.
pub fn seal_single(buf: &mut [u8], start: usize) {
    let n = buf.len() - start - 4;
    buf[start..start + 4].copy_from_slice(&fragment_header(n, true));
}

/// Reassembles records from a byte stream. Receive into [`RecordReader::buffer`], report the
/// count with [`RecordReader::filled`], then take records with [`RecordReader::next_record`].
#[derive(Clone, Debug)]
pub struct RecordReader {
    /// Received bytes live in `input[start..end]`; the rest is room to receive into (kept
    /// initialised, so receiving never zeroes memory again).
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// The fragments of a record in progress, when it has more than one.
    assembled: Vec<u8>,
    /// Whether `assembled` holds a finished record handed out by the last call.
    handed_assembled: bool,
    /// Where the last record handed out lies in `input` (unless in `assembled`).
    last: (usize, usize),
    max_record: usize,
}

impl RecordReader {
    /// A reader of records of at most `max_record` bytes (a longer one is
    /// [`RecordError::TooLarge`]).
    pub fn new(max_record: usize) -> RecordReader {
        RecordReader {
            input: Vec::new(),
            start: 0,
            end: 0,
            assembled: Vec::new(),
            handed_assembled: false,
            last: (0, 0),
            max_record,
        }
    }

    /// Room of at least `min` bytes to receive into.
    pub fn buffer(&mut self, min: usize) -> &mut [u8] {
        self.last = (0, 0);
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.input.len() - self.end < min {
            // Twice what is asked: a partial record left over later still leaves `min` of room,
            // so a steady stream of calls stops growing the buffer.
            self.input.resize(self.end + 2 * min, 0);
        }
        &mut self.input[self.end..]
    }

    /// Bytes the reader's buffers hold (grown for the largest record or read since the last
    /// [`trim`](Self::trim)).
    pub fn held(&self) -> usize {
        self.input.capacity() + self.assembled.capacity()
    }

    /// Gives back what the buffers hold beyond `keep` bytes, unless a record in progress needs
    /// it (then nothing is given back; try again after the record).
    pub fn trim(&mut self, keep: usize) {
        if self.start != self.end || !self.assembled.is_empty() && !self.handed_assembled {
            return;
        }
        self.start = 0;
        self.end = 0;
        self.last = (0, 0);
        self.input.truncate(keep);
        self.input.shrink_to(keep);
        self.assembled = Vec::new();
        self.handed_assembled = false;
    }

    /// After a receive into [`buffer`](Self::buffer): `n` bytes were written.
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.input.len());
    }

    /// The largest record read.
    pub fn max_record(&self) -> usize {
        self.max_record
    }

    /// Bytes buffered and not yet returned as records.
    pub fn pending(&self) -> usize {
        self.end - self.start + self.assembled.len()
    }

    /// The record the last [`next_record`](Self::next_record) returned (empty when there is none
    /// or when [`buffer`](Self::buffer) was called since).
    pub fn last(&self) -> &[u8] {
        if self.handed_assembled {
            &self.assembled
        } else {
            self.input.get(self.last.0..self.last.1).unwrap_or(&[])
        }
    }

    /// The next complete record, if the buffered bytes hold one.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError> {
        if self.handed_assembled {
            self.assembled.clear();
            self.handed_assembled = false;
        }
        loop {
            let avail = &self.input[self.start..self.end];
            if avail.len() < 4 {
                return Ok(None);
            }
            let h = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
            let len = (h & !LAST) as usize;
            let last = h & LAST != 0;
            let total = self.assembled.len().saturating_add(len);
            if total > self.max_record {
                return Err(RecordError::TooLarge { size: total, max: self.max_record });
            }
            if avail.len() < 4 + len {
                return Ok(None);
            }
            let from = self.start + 4;
            self.start = from + len;
            if last && self.assembled.is_empty() {
                self.last = (from, from + len);
                return Ok(Some(&self.input[from..from + len]));
            }
            self.assembled.extend_from_slice(&self.input[from..from + len]);
            if last {
                self.handed_assembled = true;
                return Ok(Some(&self.assembled));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_buffers_keep_what_was_asked_and_records_in_progress_keep_theirs() {
        let mut wire = Vec::new();
        frame_record(&vec![5u8; 300_000], 100_000, &mut wire);
        let mut r = RecordReader::new(1 << 20);
        feed(&mut r, &wire[..250_000]);
        assert!(r.next_record().unwrap().is_none());
        let held = r.held();
        assert!(held >= 250_000);
        r.trim(1000);
        assert_eq!(r.held(), held, "a record in progress lost its bytes");
        feed(&mut r, &wire[250_000..]);
        assert_eq!(r.next_record().unwrap().unwrap(), &vec![5u8; 300_000][..]);
        r.trim(1000);
        assert!(r.held() <= 1000, "{}", r.held());
        feed(&mut r, &[&fragment_header(2, true)[..], b"ok"].concat());
        assert_eq!(r.next_record().unwrap().unwrap(), b"ok");
    }

    fn feed(r: &mut RecordReader, bytes: &[u8]) {
        r.buffer(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        r.filled(bytes.len());
    }

    #[test]
    fn one_fragment_and_many_fragments_reassemble() {
        let msg: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        for frag in [1, 7, 100, 999, 1000, 5000] {
            let mut wire = Vec::new();
            frame_record(&msg, frag, &mut wire);
            frame_record(b"", frag, &mut wire);
            let mut r = RecordReader::new(4096);
            // Byte by byte: every split point.
            let mut got = Vec::new();
            for b in &wire {
                feed(&mut r, std::slice::from_ref(b));
                while let Some(rec) = r.next_record().unwrap() {
                    got.push(rec.to_vec());
                }
            }
            assert_eq!(got, vec![msg.clone(), Vec::new()], "fragment size {frag}");
        }
    }

    #[test]
    fn records_above_the_maximum_are_refused_before_buffering() {
        let mut r = RecordReader::new(100);
        feed(&mut r, &(LAST | 101).to_be_bytes());
        assert_eq!(r.next_record(), Err(RecordError::TooLarge { size: 101, max: 100 }));
        // Split over fragments, the total counts.
        let mut wire = Vec::new();
        frame_record(&[0u8; 150], 60, &mut wire);
        let mut r = RecordReader::new(100);
        feed(&mut r, &wire);
        assert!(matches!(r.next_record(), Err(RecordError::TooLarge { .. })));
    }

    #[test]
    fn sealed_single_fragment_matches_framing() {
        let mut a = vec![0u8; 4];
        a.extend_from_slice(b"hello");
        seal_single(&mut a, 0);
        let mut b = Vec::new();
        frame_record(b"hello", 1 << 20, &mut b);
        assert_eq!(a, b);
    }
}
