//! The few XDR primitives message headers need: big-endian words and padded opaques.

use crate::Error;

pub(crate) fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_opaque(b: &mut Vec<u8>, v: &[u8]) {
    put_u32(b, v.len() as u32);
    b.extend_from_slice(v);
    b.resize(b.len() + (4 - v.len() % 4) % 4, 0);
}

/// A bounds-checked reader over one message.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        let b = self.buf.get(self.pos..self.pos + 4).ok_or(Error::Truncated {
            what,
            offset: self.pos,
            len: self.buf.len(),
        })?;
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A variable-length opaque of at most `max` bytes.
    pub fn opaque(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], Error> {
        let n = self.u32(what)? as usize;
        if n > max {
            return Err(Error::TooLong { what, len: n, max });
        }
        let padded = n + (4 - n % 4) % 4;
        let b = self.buf.get(self.pos..self.pos.saturating_add(padded)).ok_or(Error::Truncated {
            what,
            offset: self.pos,
            len: self.buf.len(),
        })?;
        self.pos += padded;
        Ok(&b[..n])
    }

    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos.min(self.buf.len())..]
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
}
