//! Where encoders append: a [`Sink`]. `Vec<u8>` is one; [`OutBuf`] is the one a server's procedure
//! writes its result into, which may be lent space where the result will be read (a shared-memory
//! result ring) and falls back to a growable buffer when that space runs out.

use std::ops::{Deref, DerefMut};

/// A byte buffer that encoders append to.
pub trait Sink {
    /// Appends `bytes`.
    fn extend_from_slice(&mut self, bytes: &[u8]);
    /// Appends one byte.
    fn push(&mut self, byte: u8);
    /// Bytes written so far.
    fn len(&self) -> usize;
    /// Whether nothing is written.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        Vec::extend_from_slice(self, bytes)
    }
    #[inline]
    fn push(&mut self, byte: u8) {
        Vec::push(self, byte)
    }
    #[inline]
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// A procedure's result buffer. Either a growable `Vec` or, when the transport lends it, a fixed
/// region where the result will be read (a shared-memory result ring's free space), so the
/// result is written once, in place. A result outgrowing the region moves into the `Vec` (the
/// transport then streams it as it would any large result): nothing is ever truncated.
///
/// Only appending, truncating and rewriting bytes already written are offered, so the same
/// procedure code serves both kinds.
#[derive(Debug)]
pub struct OutBuf<'a> {
    region: &'a mut [u8],
    /// Bytes written into `region` (meaningful while `in_region`).
    placed: usize,
    in_region: bool,
    vec: &'a mut Vec<u8>,
}

impl<'a> From<&'a mut Vec<u8>> for OutBuf<'a> {
    fn from(vec: &'a mut Vec<u8>) -> Self {
        OutBuf { region: &mut [], placed: 0, in_region: false, vec }
    }
}

impl<'a> OutBuf<'a> {
    /// Writes into `region` while the result fits, then into `spill` (which is cleared first).
    pub fn in_region(region: &'a mut [u8], spill: &'a mut Vec<u8>) -> Self {
        OutBuf { region, placed: 0, in_region: true, vec: spill }
    }

    /// How many bytes lie in the lent region, if the result is still there (not spilled, and a
    /// region was lent at all).
    pub fn placed(&self) -> Option<usize> {
        self.in_region.then_some(self.placed)
    }

    /// Moves a result still in the region into the `Vec`, so that it outlives the region.
    pub fn spill(&mut self) {
        if self.in_region {
            self.vec.clear();
            self.vec.extend_from_slice(&self.region[..self.placed]);
            self.in_region = false;
        }
    }

    /// The result so far.
    pub fn as_slice(&self) -> &[u8] {
        if self.in_region {
            &self.region[..self.placed]
        } else {
            self.vec
        }
    }

    /// The result so far, to rewrite in place (a length written before its data, say).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.in_region {
            &mut self.region[..self.placed]
        } else {
            self.vec
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        if self.in_region {
            self.placed
        } else {
            self.vec.len()
        }
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for `additional` more bytes: if they will not fit the region, spills now, so
    /// that a result known to be large is copied at most once.
    pub fn reserve(&mut self, additional: usize) {
        if self.in_region && self.region.len() - self.placed < additional {
            self.spill();
        }
        if !self.in_region {
            self.vec.reserve(additional);
        }
    }

    /// Appends `bytes`.
    #[inline]
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.in_region {
            if let Some(dst) = self.region.get_mut(self.placed..self.placed + bytes.len()) {
                dst.copy_from_slice(bytes);
                self.placed += bytes.len();
                return;
            }
            self.spill();
        }
        self.vec.extend_from_slice(bytes);
    }

    /// Appends one byte.
    #[inline]
    pub fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    /// Shortens the result to `len` bytes (no effect if it is shorter already).
    pub fn truncate(&mut self, len: usize) {
        if self.in_region {
            self.placed = self.placed.min(len);
        } else {
            self.vec.truncate(len);
        }
    }

    /// Empties the result.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Grows the result to `len` bytes filled with `value`, or shortens it.
    pub fn resize(&mut self, len: usize, value: u8) {
        let have = self.len();
        if len <= have {
            return self.truncate(len);
        }
        self.reserve(len - have);
        if self.in_region {
            self.region[have..len].fill(value);
            self.placed = len;
        } else {
            self.vec.resize(len, value);
        }
    }
}

impl Deref for OutBuf<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for OutBuf<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl Sink for OutBuf<'_> {
    #[inline]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        OutBuf::extend_from_slice(self, bytes)
    }
    #[inline]
    fn push(&mut self, byte: u8) {
        OutBuf::push(self, byte)
    }
    #[inline]
    fn len(&self) -> usize {
        OutBuf::len(self)
    }
}

impl Extend<u8> for OutBuf<'_> {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        for b in bytes {
            self.push(b);
        }
    }
}

impl<'b> Extend<&'b u8> for OutBuf<'_> {
    fn extend<I: IntoIterator<Item = &'b u8>>(&mut self, bytes: I) {
        self.extend(bytes.into_iter().copied());
    }
}

impl std::io::Write for OutBuf<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_that_fits_stays_in_the_region() {
        let mut region = [0u8; 16];
        let mut spill = vec![9, 9];
        let mut out = OutBuf::in_region(&mut region, &mut spill);
        out.extend_from_slice(b"hello");
        out.push(b'!');
        out[0] = b'H';
        assert_eq!(out.placed(), Some(6));
        assert_eq!(&*out, b"Hello!");
        out.truncate(5);
        out.resize(8, b'.');
        assert_eq!(&*out, b"Hello...");
        assert_eq!(&region[..8], b"Hello...");
        assert_eq!(spill, [9, 9], "an unspilled result leaves the spill buffer alone");
    }

    #[test]
    fn a_result_outgrowing_the_region_moves_whole_into_the_vec() {
        let mut region = [0u8; 8];
        let mut spill = vec![1, 2, 3];
        let mut out = OutBuf::in_region(&mut region, &mut spill);
        out.extend_from_slice(b"abcdef");
        out.extend_from_slice(b"ghijk");
        assert_eq!(out.placed(), None);
        assert_eq!(&*out, b"abcdefghijk");
        out.resize(13, 0);
        assert_eq!(out.len(), 13);
        assert_eq!(spill, b"abcdefghijk\0\0");
    }

    #[test]
    fn reserving_more_than_the_region_spills_at_once() {
        let mut region = [0u8; 8];
        let mut spill = Vec::new();
        let mut out = OutBuf::in_region(&mut region, &mut spill);
        out.push(7);
        out.reserve(100);
        assert_eq!(out.placed(), None);
        out.push(8);
        assert_eq!(spill, [7, 8]);
    }

    #[test]
    fn a_vec_backed_buffer_appends_after_what_the_vec_holds() {
        let mut v = vec![1u8];
        let mut out = OutBuf::from(&mut v);
        assert_eq!(out.placed(), None);
        Sink::push(&mut out, 2);
        std::io::Write::write_all(&mut out, &[3, 4]).unwrap();
        out.extend([5u8, 6].iter());
        out.spill();
        assert_eq!(v, [1, 2, 3, 4, 5, 6]);
    }
}
