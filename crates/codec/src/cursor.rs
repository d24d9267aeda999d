//! The bounds-checked read position both readers share.

use crate::DecodeError;

/// Default limit on nested optional data (see [`DecodeError::TooDeep`]). Each level costs a few
/// hundred bytes of stack in generated decoders, so 1000 levels stay far inside a 2 MiB thread stack.
pub const DEFAULT_MAX_DEPTH: u32 = 1000;

#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: u32,
    max_depth: u32,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0, depth: 0, max_depth: DEFAULT_MAX_DEPTH }
    }

    pub(crate) fn set_max_depth(&mut self, max_depth: u32) {
        self.max_depth = max_depth;
    }

    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let have = self.remaining();
        if n > have {
            return Err(DecodeError::Truncated { needed: n, offset: self.pos, have });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    pub(crate) fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn enter(&mut self) -> Result<(), DecodeError> {
        if self.depth >= self.max_depth {
            return Err(DecodeError::TooDeep { max_depth: self.max_depth, offset: self.pos });
        }
        self.depth += 1;
        Ok(())
    }

    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { count, offset: self.pos }),
        }
    }
}

/// Collects `N` decoded items into an array without requiring `T: Default + Copy`; an item's
/// error says which element it was.
pub(crate) fn collect_array<T, R, const N: usize>(
    r: &mut R,
    mut item: impl FnMut(&mut R) -> Result<T, DecodeError>,
    offset: usize,
) -> Result<[T; N], DecodeError> {
    let mut v = Vec::with_capacity(N);
    for i in 0..N {
        v.push(item(r).map_err(|e| e.at_index(i))?);
    }
    // The vector holds exactly N items here, so the conversion cannot fail; the error only keeps
    // the function total without a panic path.
    v.try_into().map_err(|_| DecodeError::Truncated { needed: N, offset, have: 0 })
}
